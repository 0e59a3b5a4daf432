import type { Modality } from '../encoder/encode-request.schema';

/** Media files the CLI reads, by extension: their MIME type and modality. */
export const MEDIA_TYPES: Readonly<Record<string, readonly [string, Modality]>> = {
  '.png': ['image/png', 'image'],
  '.jpg': ['image/jpeg', 'image'],
  '.jpeg': ['image/jpeg', 'image'],
  '.webp': ['image/webp', 'image'],
  '.gif': ['image/gif', 'image'],
  '.mp4': ['video/mp4', 'video'],
  '.webm': ['video/webm', 'video'],
  '.wav': ['audio/wav', 'audio'],
  '.flac': ['audio/flac', 'audio'],
  '.mp3': ['audio/mpeg', 'audio'],
  '.ogg': ['audio/ogg', 'audio'],
};
