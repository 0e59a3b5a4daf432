/**
 * Credentials in URLs (`nats://user:secret@host`, `tls://token@host`) replaced with `***`
 * wherever text may reach a log, an error or a health body.
 */
export function redactUrls(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/)[^@/\s]+@/gi, '$1***@');
}
