// oracle.mjs JOBS.json OUT.json: the ids @huggingface/tokenizers gives (the reference of
// clipdb's tokenizer.json backend, encoder/tok_hf*.c). JOBS.json:
//   {"jobs": [{"tokenizer": "/path/tokenizer.json", "texts": ["<base64 of UTF-8 bytes>", ...]}]}
// OUT.json: {"results": [[[id, ...] per text] per job]}, or {"errors": [...]} for a job
// whose tokenizer the reference refuses. Bytes are decoded as JS decodes them (WHATWG
// TextDecoder, a replacement character per ill-formed subpart, a BOM kept); encode()
// runs with add_special_tokens = true and an empty tokenizer_config.
import { readFileSync, writeFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

const [inPath, outPath] = process.argv.slice(2);
const { jobs } = JSON.parse(readFileSync(inPath, "utf8"));
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
const results = [];
for (const job of jobs) {
  const tok = new Tokenizer(JSON.parse(readFileSync(job.tokenizer, "utf8")), {});
  results.push(job.texts.map((b64) => tok.encode(decoder.decode(Buffer.from(b64, "base64"))).ids));
}
writeFileSync(outPath, JSON.stringify({ results }));
