// Vite's `?raw` imports: a file's text, without Node's fs in typed test code.
declare module "*?raw" {
  const text: string;
  export default text;
}
