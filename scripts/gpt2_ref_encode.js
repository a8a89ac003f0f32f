// The reference encoder for the tests: the npm package gpt-3-encoder@1.1.4 (a port
// of OpenAI's encoder.py that agrees with tiktoken on Tiny Shakespeare).
//
//   node scripts/gpt2_ref_encode.js PKG_DIR [--unicode-space] FILE > ids.txt
//   node scripts/gpt2_ref_encode.js --space-deviations
//   node scripts/gpt2_ref_encode.js PKG_DIR --llmc-sections FILE
//
// PKG_DIR is the unpacked package (Encoder.js, encoder.json, vocab.bpe). FILE must be
// valid UTF-8 (JavaScript strings cannot hold invalid bytes). Token ids are printed
// one per line.
//
// The package's encode() appends each piece's tokens with bpe_tokens.concat(), which
// copies the whole array every time: 8 minutes for Tiny Shakespeare. That line is
// replaced by an in-place push, which changes nothing but the speed (the full
// unpatched run gave the same 338,025 ids when this was written).
//
// --unicode-space runs the package's own code with one change: in its pattern, \s and
// \S become \p{White_Space} and \P{White_Space}. JavaScript's \s is not Unicode's
// White_Space: it includes U+FEFF (ZERO WIDTH NO-BREAK SPACE) and lacks U+0085 (NEXT
// LINE). GPT-2's Python regex and tiktoken use White_Space, as llmc/bpe.h does.
//
// --llmc-sections prints the token stream of llm.c's dev/data/tinyshakespeare.py
// (EOT before each "\n\n"-separated section), to check prepare_data --split-blank-lines.
//
// --space-deviations prints every code point on which /\s/u and /\p{White_Space}/u
// disagree, as "U+XXXX js-only" or "U+XXXX unicode-only".
'use strict';
const fs = require('fs');
const path = require('path');
const Module = require('module');

function loadEncoder(pkgDir, unicodeSpace) {
  const file = path.join(path.resolve(pkgDir), 'Encoder.js');
  let src = fs.readFileSync(file, 'utf-8');
  const slowAppend = 'bpe_tokens = bpe_tokens.concat(new_tokens)';
  if (!src.includes(slowAppend)) { throw new Error(file + ': expected code not found (not gpt-3-encoder@1.1.4?)'); }
  src = src.replace(slowAppend, 'for (const t of new_tokens) bpe_tokens.push(t)');
  if (unicodeSpace) {
    const original = String.raw`const pat = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu`;
    const patched = String.raw`const pat = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+/gu`;
    if (!src.includes(original)) { throw new Error(file + ': the GPT-2 pattern was not found (not gpt-3-encoder@1.1.4?)'); }
    src = src.replace(original, patched);
  }
  const m = new Module(file, module);
  m.filename = file;
  m.paths = Module._nodeModulePaths(path.dirname(file));
  m._compile(src, file);
  return m.exports;
}

function main() {
  const args = process.argv.slice(2);
  if (args[0] === '--space-deviations') {
    for (let cp = 0; cp <= 0x10FFFF; cp++) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      const c = String.fromCodePoint(cp);
      const js = /\s/u.test(c), uni = /\p{White_Space}/u.test(c);
      if (js !== uni) console.log('U+' + cp.toString(16).toUpperCase().padStart(4, '0') + (js ? ' js-only' : ' unicode-only'));
    }
    return;
  }
  const unicodeSpace = args.includes('--unicode-space');
  const llmcSections = args.includes('--llmc-sections');
  const rest = args.filter(a => a !== '--unicode-space' && a !== '--llmc-sections');
  if (rest.length !== 2) {
    process.stderr.write('usage: node gpt2_ref_encode.js PKG_DIR [--unicode-space] [--llmc-sections] FILE\n');
    process.exit(2);
  }
  const enc = loadEncoder(rest[0], unicodeSpace);
  const bytes = fs.readFileSync(rest[1]);
  // ignoreBOM: a leading U+FEFF is text to encode, not a byte order mark to drop
  const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  let ids;
  if (llmcSections) {
    // llm.c's dev/data/tinyshakespeare.py, step for step:
    //   sections = text.split("\n\n"); for each: EOT, then encode(section + "\n\n"),
    //   without the "\n\n" for the last section
    const EOT = 50256;
    const sections = text.split('\n\n');
    ids = [];
    sections.forEach((s, i) => {
      ids.push(EOT);
      for (const t of enc.encode(i !== sections.length - 1 ? s + '\n\n' : s)) ids.push(t);
    });
  } else {
    // the whole text in one call, as the package is meant to be used
    ids = enc.encode(text);
  }
  process.stdout.write(ids.join('\n') + (ids.length ? '\n' : ''));
}

main();
