import { raw } from "hono/html";
import type { FC } from "hono/jsx";

interface SchemaObject {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, SchemaObject>;
  required?: string[];
  items?: SchemaObject;
  enum?: unknown[];
  anyOf?: SchemaObject[];
  oneOf?: SchemaObject[];
  description?: string;
  format?: string;
  pattern?: string;
  example?: unknown;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  const?: unknown;
}
interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema?: SchemaObject;
}
interface Operation {
  operationId?: string;
  servers?: { url: string }[];
  summary?: string;
  description?: string;
  tags?: string[];
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema: SchemaObject }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: SchemaObject }> }>;
}
type PathItem = { servers?: { url: string }[] } & { [method in (typeof METHODS)[number]]?: Operation };
export interface OpenApiDocument {
  info: { title: string; version: string; description?: string };
  servers?: { url: string }[];
  paths: Record<string, PathItem>;
  components?: { schemas?: Record<string, SchemaObject> };
}

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const;

const refName = (ref: string) => ref.split("/").at(-1) ?? ref;

/** The document's descriptions use Markdown code spans (`like this`); they render as code, the rest as text. */
export const Md: FC<{ text: string | undefined }> = ({ text }) => (
  <>{(text ?? "").split(/`([^`]+)`/).map((part, i) => (i % 2 === 1 ? <code>{part}</code> : part))}</>
);

/** A short type label: `string (uri)`, `Build[]`, `"a" | "b"`, with links to named schemas. */
const TypeOf: FC<{ schema: SchemaObject | undefined }> = ({ schema }) => {
  if (!schema) return <span>any</span>;
  if (schema.$ref) return <a href={`#schema-${refName(schema.$ref)}`}>{refName(schema.$ref)}</a>;
  const variants = schema.anyOf ?? schema.oneOf;
  if (variants) {
    return (
      <span>
        {variants.map((v, i) => (
          <>
            {i > 0 ? " | " : ""}
            <TypeOf schema={v} />
          </>
        ))}
      </span>
    );
  }
  if (schema.enum) return <span>{schema.enum.map((v) => JSON.stringify(v)).join(" | ")}</span>;
  if (schema.const !== undefined) return <span>{JSON.stringify(schema.const)}</span>;
  if (schema.type === "array") {
    return (
      <span>
        <TypeOf schema={schema.items} />
        []
      </span>
    );
  }
  const type = Array.isArray(schema.type) ? schema.type.join(" | ") : (schema.type ?? "object");
  return <span>{schema.format ? `${type} (${schema.format})` : type}</span>;
};

function constraints(schema: SchemaObject): string {
  const parts: string[] = [];
  if (schema.pattern) parts.push(`pattern ${schema.pattern}`);
  if (schema.minLength !== undefined) parts.push(`min length ${schema.minLength}`);
  if (schema.maxLength !== undefined) parts.push(`max length ${schema.maxLength}`);
  if (schema.minimum !== undefined) parts.push(`min ${schema.minimum}`);
  if (schema.maximum !== undefined) parts.push(`max ${schema.maximum}`);
  if (schema.example !== undefined) parts.push(`e.g. ${JSON.stringify(schema.example)}`);
  return parts.join("; ");
}

const Fields: FC<{ schema: SchemaObject }> = ({ schema }) => {
  const properties = Object.entries(schema.properties ?? {});
  if (properties.length === 0) return <p>No fields.</p>;
  return (
    <table>
      <thead>
        <tr>
          <th scope="col">Field</th>
          <th scope="col">Type</th>
          <th scope="col">Notes</th>
        </tr>
      </thead>
      <tbody>
        {properties.map(([name, property]) => (
          <tr>
            <td>
              <code>{name}</code>
              {schema.required?.includes(name) ? " (required)" : ""}
            </td>
            <td>
              <TypeOf schema={property} />
            </td>
            <td>
              <Md text={[property.description, constraints(property)].filter(Boolean).join(" — ")} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
};

const STYLE = `
body{font:16px/1.5 system-ui,sans-serif;margin:0;color:#1a1a1a;background:#fff}
main{max-width:960px;margin:0 auto;padding:1rem 1.25rem 4rem}
nav ul{columns:2;padding-left:1.25rem}
code{font:0.92em ui-monospace,monospace;background:#f2f2f2;padding:0 .2em;border-radius:3px}
section.op{border-top:1px solid #ddd;padding-top:.5rem;margin-top:1.5rem}
.method{display:inline-block;min-width:4.5em;font-weight:700;text-transform:uppercase}
.get{color:#005a9c}.post{color:#106b21}.patch{color:#7a4d00}.delete{color:#a3141d}
table{border-collapse:collapse;width:100%;margin:.5rem 0}
th,td{text-align:left;vertical-align:top;border-bottom:1px solid #e5e5e5;padding:.3rem .5rem}
a{color:#005a9c}
@media (max-width:600px){nav ul{columns:1}}
`;

export const ReferencePage: FC<{
  doc: OpenApiDocument;
  problems: Record<string, { status: number; title: string }>;
}> = ({ doc, problems }) => {
  const operations = Object.entries(doc.paths).flatMap(([path, item]) =>
    METHODS.flatMap((method) => {
      const op = item[method];
      // An operation's or path item's own server (the run endpoint's /v4) wins over the document's (/v2).
      const url = `${op?.servers?.[0]?.url ?? item.servers?.[0]?.url ?? doc.servers?.[0]?.url ?? ""}${path}`;
      return op ? [{ url, method, op, id: op.operationId ?? `${method}-${path}`.replace(/[^a-z0-9]+/gi, "-") }] : [];
    }),
  );
  const schemas = Object.entries(doc.components?.schemas ?? {});
  return (
    <>
      {raw("<!DOCTYPE html>")}
      <html lang="en">
        <head>
          <meta charset="utf-8" />
          <meta name="viewport" content="width=device-width, initial-scale=1" />
          <title>{`${doc.info.title} ${doc.info.version}`}</title>
          <style>{STYLE}</style>
        </head>
        <body>
          <main>
            <h1>
              {doc.info.title} <small>v{doc.info.version}</small>
            </h1>
            <p>
              <Md text={doc.info.description} />
            </p>
            <p>
              Machine-readable: <a href="openapi.json">openapi.json</a> (OpenAPI 3.1).
            </p>
            <nav aria-label="Operations">
              <h2>Operations</h2>
              <ul>
                {operations.map(({ method, url, op, id }) => (
                  <li>
                    <a href={`#${id}`}>
                      <span class={`method ${method}`}>{method}</span> {op.summary ?? url}
                    </a>
                  </li>
                ))}
              </ul>
            </nav>
            {operations.map(({ method, url, op, id }) => (
              <section class="op" id={id}>
                <h3>
                  <span class={`method ${method}`}>{method}</span> <code>{url}</code>
                </h3>
                <p>
                  <strong>{op.summary}</strong> <Md text={op.description} />
                </p>
                {op.parameters?.length ? (
                  <>
                    <h4>Parameters</h4>
                    <table>
                      <tbody>
                        {op.parameters.map((p) => (
                          <tr>
                            <td>
                              <code>{p.name}</code> ({p.in}
                              {p.required ? ", required" : ""})
                            </td>
                            <td>
                              <TypeOf schema={p.schema} />
                            </td>
                            <td>
                              <Md
                                text={[p.description ?? p.schema?.description, p.schema ? constraints(p.schema) : ""]
                                  .filter(Boolean)
                                  .join(" — ")}
                              />
                            </td>
                          </tr>
                        ))}
                      </tbody>
                    </table>
                  </>
                ) : null}
                {op.requestBody ? (
                  <>
                    <h4>Request body</h4>
                    {Object.entries(op.requestBody.content).map(([type, media]) => (
                      <p>
                        <code>{type}</code>: <TypeOf schema={media.schema} />
                      </p>
                    ))}
                  </>
                ) : null}
                <h4>Responses</h4>
                <ul>
                  {Object.entries(op.responses).map(([status, response]) => (
                    <li>
                      <strong>{status}</strong> <Md text={response.description} />{" "}
                      {Object.values(response.content ?? {}).map((media) => (
                        <TypeOf schema={media.schema} />
                      ))}
                    </li>
                  ))}
                </ul>
              </section>
            ))}
            <h2>Schemas</h2>
            {schemas.map(([name, schema]) => (
              <section id={`schema-${name}`}>
                <h3>{name}</h3>
                {schema.description ? (
                  <p>
                    <Md text={schema.description} />
                  </p>
                ) : null}
                {schema.oneOf || schema.anyOf ? (
                  (schema.oneOf ?? schema.anyOf ?? []).map((variant) => <Fields schema={variant} />)
                ) : (
                  <Fields schema={schema} />
                )}
              </section>
            ))}
            <h2 id="problems">Problem codes</h2>
            <p>
              Every error is <code>application/problem+json</code> with <code>type</code>{" "}
              <code>urn:edge-gateway:problem:&lt;code&gt;</code>.
            </p>
            <table>
              <thead>
                <tr>
                  <th scope="col">code</th>
                  <th scope="col">status</th>
                  <th scope="col">title</th>
                </tr>
              </thead>
              <tbody>
                {Object.entries(problems).map(([code, problem]) => (
                  <tr id={`problem-${code}`}>
                    <td>
                      <code>{code}</code>
                    </td>
                    <td>{problem.status}</td>
                    <td>{problem.title}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </main>
        </body>
      </html>
    </>
  );
};
