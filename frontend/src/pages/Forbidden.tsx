// A page the signed-in user's roles do not open (the server answered 403): says who may, and where to go instead.
import { usePageContext } from "../lib/context";
import { EmptyState } from "../shell/ui";
import { ButtonLink } from "../shell/Button";

/**
 * ``group``: the role group that opens the page (e.g. "operators"), or absent when only
 * staff accounts may: the advice names the one thing an administrator can change.
 */
export default function Forbidden({ what = "this page", who = "administrators", group }: { what?: string; who?: string; group?: string }) {
  const ctx = usePageContext();
  return (
    <main className="page">
      <h1>{ctx.title}</h1>
      <EmptyState title={`Only ${who} may see ${what}`} actions={<ButtonLink href={ctx.urls.home ?? "/"}>Go to home</ButtonLink>}>
        {group
          ? <>If you need it, ask an administrator to add you to the <strong>{group}</strong> group (Admin → Users → Groups).</>
          : <>If you need it, ask an administrator: only staff accounts may (Admin → Users → Staff status).</>}
      </EmptyState>
    </main>
  );
}
