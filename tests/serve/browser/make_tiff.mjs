// make_tiff.mjs: writes a baseline TIFF (uncompressed 8-bit RGB, one strip) of a red
// disc on a blue-to-white gradient, for the viewer's preview in test_serve_page.sh:
// a photo browsers cannot show, generated at test time instead of committed. Usage:
//   node make_tiff.mjs OUT.tif WIDTH HEIGHT
import { writeFileSync } from 'node:fs';

const [out, ws, hs] = process.argv.slice(2);
const w = parseInt(ws, 10), h = parseInt(hs, 10);
if (!out || !(w > 0) || !(h > 0)) {
  console.error('usage: node make_tiff.mjs OUT.tif WIDTH HEIGHT');
  process.exit(2);
}
const n = w * h * 3;
const tags = [ // [tag, type (3 SHORT, 4 LONG), value]
  [256, 4, w], [257, 4, h], [258, 3, 8], [259, 3, 1], [262, 3, 2], [273, 4, 0],
  [277, 3, 3], [278, 4, h], [279, 4, n], [284, 3, 1],
];
const bpsAt = 8 + 2 + tags.length * 12 + 4; // BitsPerSample's three values
const dataAt = bpsAt + 6;
const b = Buffer.alloc(dataAt + n);
b.write('II', 0, 'latin1');
b.writeUInt16LE(42, 2);
b.writeUInt32LE(8, 4);
b.writeUInt16LE(tags.length, 8);
tags.forEach(([tag, type, v], i) => {
  const o = 10 + i * 12;
  b.writeUInt16LE(tag, o);
  b.writeUInt16LE(type, o + 2);
  b.writeUInt32LE(tag === 258 ? 3 : 1, o + 4);
  if (tag === 258) b.writeUInt32LE(bpsAt, o + 8);
  else if (tag === 273) b.writeUInt32LE(dataAt, o + 8);
  else if (type === 3) b.writeUInt16LE(v, o + 8);
  else b.writeUInt32LE(v, o + 8);
});
for (let i = 0; i < 3; i++) b.writeUInt16LE(8, bpsAt + 2 * i);
const r = Math.min(w, h) / 3;
for (let y = 0; y < h; y++) {
  for (let x = 0; x < w; x++) {
    const o = dataAt + (y * w + x) * 3;
    const inDisc = (x - w / 2) ** 2 + (y - h / 2) ** 2 < r * r;
    const t = Math.round((255 * y) / h);
    b[o] = inDisc ? 220 : t;
    b[o + 1] = inDisc ? 30 : t;
    b[o + 2] = inDisc ? 30 : 255;
  }
}
writeFileSync(out, b);
