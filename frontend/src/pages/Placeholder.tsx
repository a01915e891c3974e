// A page that only says where it is; replaced by real pages as they are built.
import { usePageContext } from "../lib/context";

export default function Placeholder() {
  const ctx = usePageContext();
  return <main className="page"><h1>{ctx.title}</h1></main>;
}
