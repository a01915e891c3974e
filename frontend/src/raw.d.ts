// Vite's "?raw" imports (a file's text as a string): the status tokens' test reads styles/status.css so.
declare module "*?raw" {
  const text: string;
  export default text;
}
