// Test inputs and checks for scripts/test_tokenizer.sh (node, no packages).
//
//   node scripts/tokenizer_test_data.js stress OUT [--no-js-deviations]
//       writes the multilingual stress text (valid UTF-8). With --no-js-deviations
//       the two characters on which JavaScript's \s differs from Unicode's
//       White_Space (U+0085, U+FEFF) are left out, everything else is the same.
//   node scripts/tokenizer_test_data.js bytes OUT N SEED
//       writes N pseudo-random bytes (mostly invalid UTF-8, with ASCII words and
//       spaces mixed in so that merges happen).
//   node scripts/tokenizer_test_data.js compare-classes UNICODEDATA.txt RANGES
//       compares ./tokenize --char-classes output (RANGES) with this node's
//       \p{L}, \p{N} and \p{White_Space} on every code point that UNICODEDATA.txt
//       (the Unicode version our tables were made from) assigns. Prints the
//       mismatches and exits 1 if there are any. Code points assigned only in a
//       later Unicode version (node 20 has Unicode 15.1 or newer) are counted and
//       reported, not compared.
'use strict';
const fs = require('fs');

// mulberry32: a small seeded PRNG, so the inputs are the same on every run
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const cp = (...cps) => String.fromCodePoint(...cps);

// Every White_Space character, JavaScript's extra U+FEFF, and look-alikes that are
// not spaces in either (ZERO WIDTH SPACE, WORD JOINER, MONGOLIAN VOWEL SEPARATOR).
const SPACES = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003,
  0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
  0xFEFF, 0x200B, 0x2060, 0x180E].map(c => cp(c));

function stressText(noDeviations) {
  const parts = [
    // contractions in lower and upper case, and apostrophes that are not contractions
    "I'm sure you're right: we'll see, they've said it's done, he'd go, can't won't isn't.",
    "I'M SURE YOU'RE RIGHT: WE'LL SEE, THEY'VE SAID IT'S DONE, HE'D GO. 'S 'T 'RE 'VE 'M 'LL 'D",
    "'s't're've'm'll'd 'sx 'ss ''s ' s 'x rock'n'roll 90's o'clock ’s ’re (curly apostrophes)",
    // accented Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Bengali
    "Ça va? Señor Müller aß Crème brûlée à Łódź, Ærøskøbing, Þórr, İstanbul, ǅemal, ﬁne ﬂow.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю. Ёжик!",
    "Τάχιστη αλώπηξ βαφής ψημένη γη, δρασκελίζει υπέρ νωθρού κυνός. ΆΈΉ",
    "نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر ومغلف بجلد أزرق. ١٢٣٤٥٦٧٨٩٠",
    "דג סקרן שט בים מאוכזב ולפתע מצא חברה. שָׁלוֹם",
    "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम। ०१२३४५६७८९",
    "আমার সোনার বাংলা, আমি তোমায় ভালোবাসি। ০১২৩৪৫৬৭৮৯",
    // CJK, kana, Hangul, Thai, fullwidth
    "我能吞下玻璃而不伤身体。日本語の文章とカタカナ、ひらがな。ｶﾀｶﾅ 한국어 문장입니다. 키스의 고유조건은",
    "เป็นมนุษย์สุดประเสริฐเลิศคุณค่า ๑๒๓ ＡＢＣ１２３！？",
    // emoji: ZWJ sequences, skin tones, flags, keycaps, variation selectors
    "👨‍👩‍👧‍👦 family, 👩🏽‍💻 coder, 👍🏻👍🏼👍🏽👍🏾👍🏿 thumbs, 🏳️‍🌈 🏴‍☠️ flags 🇺🇸🇯🇵🇩🇪🇫🇷 1️⃣ #️⃣ ❤️ ☺︎",
    // combining marks
    "e\u0301 a\u0308 n\u0303 Z\u0351\u0337\u0353a\u0300\u0321l\u0336\u0322g\u0338o\u0335 q\u0307\u0323 \u0301start",
    // digits of other scripts, fractions, superscripts, Roman numerals, math alphanumerics
    "digits: ٠١٢ ۴۵۶ ߀߁ ৪৫ ੬੭ ௧௨ ໑໒ ༢༣ ၃၄ ០១ ᠐᠑ １２ 𝟎𝟏𝟐 𝟘𝟙 🄀",
    "fractions: ½ ⅓ ¾ ⅞ ↉ 3½ 1⁄2 superscripts: x² y³ n⁹ H₂O ¹²³ ⁰ roman: Ⅰ Ⅱ Ⅻ ⅻ ↂ ⅰⅱⅲ",
    "math: 𝐀𝐁𝐂 𝑎𝑏𝑐 𝔄𝔅 𝕏𝕐 𝖆 𝗔𝗕 𝘢 𝙰𝙱 𝛂𝛃 ℝℕℤ ∀x∈ℝ: x²≥0 ∑∫∂ ≠≤≥ ⊕⊗",
    // ASCII punctuation, numbers, symbols
    "$1,234.56 + 7.8e-9 = ???; (a+b)*[c/d] {x: 'y'} <tag attr=\"v\"/> #hash @user 100% a_b a-b ~`^|\\",
    "<|endoftext|> is plain text here, and so is <|fim_prefix|>.",
    // control characters, CRLF, tabs
    "ctl:\u0000\u0001\u0007\u0008\u001b[0m\u001c\u001d\u001e\u001f\u007f end",
    "line one\r\nline two\r\n\r\nafter blank\rCR only\n\ttab\tbetween\t\twords\t \t\n",
    // whitespace runs of every length before words, numbers and symbols
    "x" + " ".repeat(100) + "y" + "\n".repeat(7) + "z" + " \n \n".repeat(5) + "w\t\t\t  \t  !" + "   123",
    "trailing spaces then newline   \n   leading spaces\n\n\n   \n",
  ];
  // every space-like character between words, doubled, before a space, at the end of a run
  for (const s of SPACES) {
    parts.push("a" + s + "b " + s + s + "c" + s + " d" + s + "  e " + s + "1" + s + "!" + s + s);
  }
  // long pieces (the heap merge path): a long word, a long number, long symbol and space runs
  const r = rng(12345);
  let word = "";
  for (let i = 0; i < 3000; i++) word += "abcdefghijklmnopqrstuvwxyz"[Math.floor(r() * 26)];
  parts.push(" " + word + " " + "9".repeat(500) + "1234567890".repeat(40) + " " + "-=".repeat(400) + " ".repeat(2000) + "end");
  // pseudo-random mixtures of everything above, to hit combinations
  const alphabet = Array.from(parts.join("") + SPACES.join("").repeat(20));
  for (let i = 0; i < 400; i++) {
    let s = "";
    const n = 1 + Math.floor(r() * 40);
    for (let k = 0; k < n; k++) s += alphabet[Math.floor(r() * alphabet.length)];
    parts.push(s);
  }
  let text = parts.join("\n") + "  \u2029";  // ends in whitespace
  if (noDeviations) text = text.replace(/[\u0085\uFEFF]/g, "");
  return text;
}

function randomBytes(n, seed) {
  const r = rng(seed);
  const buf = Buffer.alloc(n);
  const words = ["the", " of", " and", "ing", " ", "  ", "\n", "'s", "'ll", "123", "é", "€", "😀"].map(w => Buffer.from(w));
  let i = 0;
  while (i < n) {
    if (r() < 0.3) {
      const w = words[Math.floor(r() * words.length)];
      for (let k = 0; k < w.length && i < n; k++) buf[i++] = w[k];
    } else {
      buf[i++] = Math.floor(r() * 256);
    }
  }
  return buf;
}

function compareClasses(unicodeDataPath, rangesPath) {
  // assigned code points of the Unicode version the tables were made from
  const assigned = new Uint8Array(0x110000);
  let rangeStart = -1;
  for (const line of fs.readFileSync(unicodeDataPath, 'utf-8').split('\n')) {
    if (!line) continue;
    const f = line.split(';');
    const c = parseInt(f[0], 16);
    if (f[1].endsWith(', First>')) { rangeStart = c; continue; }
    const first = f[1].endsWith(', Last>') ? rangeStart : c;
    for (let k = first; k <= c; k++) assigned[k] = 1;
  }
  const mine = new Array(0x110000);
  for (const line of fs.readFileSync(rangesPath, 'utf-8').split('\n')) {
    if (!line) continue;
    const [lo, hi, cls] = line.split(' ');
    for (let k = parseInt(lo, 16); k <= parseInt(hi, 16); k++) mine[k] = cls;
  }
  let compared = 0, skipped = 0, newer = 0;
  const bad = [];
  for (let c = 0; c < 0x110000; c++) {
    if (mine[c] === undefined) { bad.push('U+' + c.toString(16) + ' missing from the ranges'); continue; }
    if (c >= 0xD800 && c <= 0xDFFF) { skipped++; continue; }  // not characters
    const s = String.fromCodePoint(c);
    const js = /\p{L}/u.test(s) ? 'letter' : /\p{N}/u.test(s) ? 'number' : /\p{White_Space}/u.test(s) ? 'space' : 'other';
    if (!assigned[c]) {
      if (mine[c] !== 'other') bad.push('U+' + c.toString(16).toUpperCase() + ' is unassigned but classed ' + mine[c]);
      if (js !== 'other') newer++;
      continue;
    }
    compared++;
    if (js !== mine[c]) bad.push('U+' + c.toString(16).toUpperCase() + ': tables say ' + mine[c] + ', node (Unicode ' + process.versions.unicode + ') says ' + js);
  }
  console.log(`compared ${compared} assigned code points; ${newer} letters/numbers assigned after our Unicode version not compared; ${bad.length} mismatches`);
  for (const b of bad.slice(0, 20)) console.log(b);
  process.exit(bad.length ? 1 : 0);
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === 'stress') {
  fs.writeFileSync(args[0], stressText(args.includes('--no-js-deviations')), 'utf-8');
} else if (cmd === 'bytes') {
  fs.writeFileSync(args[0], randomBytes(parseInt(args[1]), parseInt(args[2])));
} else if (cmd === 'compare-classes') {
  compareClasses(args[0], args[1]);
} else {
  process.stderr.write('usage: node tokenizer_test_data.js stress OUT [--no-js-deviations] | bytes OUT N SEED | compare-classes UNICODEDATA RANGES\n');
  process.exit(2);
}
