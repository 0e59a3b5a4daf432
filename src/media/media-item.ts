/** One media reference of a request: data URI, base64, file path or URL, and its hash. */
export interface MediaItem {
  url: string;
  /** sha256 (hex, optionally `sha256:`-prefixed) the loaded bytes must have. */
  content_hash?: string;
}
