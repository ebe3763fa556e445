/** The parser the metrics test reads a scrape with (it ships no types): the families, as prom2json writes them. */
declare module "parse-prometheus-text-format" {
  export default function parsePrometheusTextFormat(text: string): unknown[];
}
