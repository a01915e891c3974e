// A page whose object does not exist or is not the user's to see, or an address no page has (the server answered 404): says so, with a way on.
import { usePageContext } from "../lib/context";
import { EmptyState } from "../shell/ui";
import { ButtonLink } from "../shell/Button";

/**
 * ``what`` names the object asked for ("run #12"), ``back`` a list to go back to; without
 * them ``address`` is a URL no page has. A visitor who is not signed in is offered the
 * sign-in page instead of home.
 */
export default function NotFound({ what = "this page", back, backLabel, address }: { what?: string; back?: string; backLabel?: string; address?: string }) {
  const ctx = usePageContext();
  const onward = ctx.user
    ? <ButtonLink href={ctx.urls.home ?? "/"}>Go to home</ButtonLink>
    : <ButtonLink variant="primary" href={ctx.urls.login ?? "/accounts/login/"}>Sign in</ButtonLink>;
  if (address !== undefined) {
    return (
      <main className="page">
        <h1>Page not found</h1>
        <EmptyState title="There is no page at this address" actions={onward}>
          <code className="mono">{address}</code> is not a Ballast page. Check the address for a typo, or start again from {ctx.user ? "the home page" : "the sign-in page"}.
        </EmptyState>
      </main>
    );
  }
  return (
    <main className="page">
      <h1>Not found</h1>
      <EmptyState title={`There is no ${what} you may see`} actions={<>
        {back ? <ButtonLink href={back}>{backLabel ?? "Back"}</ButtonLink> : null}
        {onward}
      </>}>
        It may have been deleted, or it belongs to a graph you have no role on. Ask its owner or an administrator if you need it.
      </EmptyState>
    </main>
  );
}
