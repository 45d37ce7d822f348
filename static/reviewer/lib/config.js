// The page's config, written by the server into <script id="page-config">:
// ids, URLs, and the vocabulary the server owns (passes, severities, finding
// and run statuses, hops, speeds, frame metrics). Scripts read names from
// here rather than spelling them out.

export const config = JSON.parse(document.getElementById("page-config").textContent);

/** A choice's label by its key, e.g. a severity's label from config.severities. */
export function labelOf(choices, key) {
  const found = choices.find((c) => c.key === key);
  return found ? found.label : key;
}
