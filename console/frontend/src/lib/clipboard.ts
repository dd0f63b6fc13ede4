// copyText puts text on the clipboard; false when the browser refuses (plain HTTP to another
// host is not a secure context), so that the caller shows the text to copy by hand.
export async function copyText(text: string): Promise<boolean> {
  try {
    if (!navigator.clipboard) return false;
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}
