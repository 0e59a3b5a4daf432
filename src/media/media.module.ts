import { Module } from '@nestjs/common';
import { MediaLoader } from './media-loader.service';

/**
 * Getting media bytes from what a request names, safely: data URIs and base64, files
 * confined to EPD_MEDIA_ROOT, and URLs under the allow-list and the private-network
 * policy, with size caps and one deadline for a URL and its redirects; and reading audio
 * containers (`audio/`: WAV, FLAC, Ogg Vorbis, MP3). It changes for network, security and
 * file-format reasons, not model ones, so it lives outside the encoder.
 */
@Module({ providers: [MediaLoader], exports: [MediaLoader] })
export class MediaModule {}
