// The API counts positions in bytes of UTF-8 (docs/api.md: filter/complete's offset, the
// position of an error); the editor in UTF-16 code units. These convert between the two.

// byteOffset is the UTF-8 length of text[0:index].
export function byteOffset(text: string, index: number): number {
  let bytes = 0;
  for (let i = 0; i < index && i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      // A surrogate pair is one code point of 4 bytes.
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        if (i + 1 >= index) return bytes; // index splits the pair: stop before it
        bytes += 4;
        i++;
        continue;
      }
      bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

// charIndex is the index in text of UTF-8 byte offset (clamped to the text; an offset inside
// a code point gives the start of that code point).
export function charIndex(text: string, offset: number): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    if (bytes >= offset) return i;
    const c = text.charCodeAt(i);
    let n: number;
    if (c < 0x80) n = 1;
    else if (c < 0x800) n = 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        if (bytes + 4 > offset) return i;
        bytes += 4;
        i++;
        continue;
      }
      n = 3;
    } else n = 3;
    if (bytes + n > offset) return i;
    bytes += n;
  }
  return text.length;
}
