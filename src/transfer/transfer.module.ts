import { Module } from '@nestjs/common';
import { EmbeddingTransport } from './embedding-transport';
import { TcpEmbeddingSender } from './tcp-sender.service';

/** The data plane: TCP delivery of staged embeddings with an application-level ack. */
@Module({
  providers: [{ provide: EmbeddingTransport, useClass: TcpEmbeddingSender }],
  exports: [EmbeddingTransport],
})
export class TransferModule {}
