// A page the signed-in user's roles do not open (the server answered 403): says who may, and where to go instead.
import { usePageContext } from "../lib/context";
import { EmptyState } from "../shell/ui";

export default function Forbidden({ what = "this page", who = "administrators" }: { what?: string; who?: string }) {
  const ctx = usePageContext();
  return (
    <main className="page">
      <h1>{ctx.title}</h1>
      <EmptyState title={`Only ${who} may see ${what}`} actions={<a className="btn" href={ctx.urls.home ?? "/"}>Go to home</a>}>
        Ask an administrator for the role if you need it (Admin → Users → Groups).
      </EmptyState>
    </main>
  );
}
