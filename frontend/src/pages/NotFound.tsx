// A page whose object does not exist or is not the user's to see (the server answered 404): says so, with a way on.
import { usePageContext } from "../lib/context";
import { EmptyState } from "../shell/ui";

export default function NotFound({ what = "this page", back, backLabel }: { what?: string; back?: string; backLabel?: string }) {
  const ctx = usePageContext();
  return (
    <main className="page">
      <h1>Not found</h1>
      <EmptyState title={`There is no ${what} you may see`} actions={<>
        {back ? <a className="btn" href={back}>{backLabel ?? "Back"}</a> : null}
        <a className="btn" href={ctx.urls.home ?? "/"}>Go to home</a>
      </>}>
        It may have been deleted, or it belongs to a graph you have no role on. Ask its owner or an administrator if you need it.
      </EmptyState>
    </main>
  );
}
