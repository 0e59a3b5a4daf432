import { Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { EmbeddingTransport } from './embedding-transport';
import { TcpEmbeddingSender } from './tcp-sender.service';
import { ZmqEmbeddingSender } from './zmq/zmq-sender.service';

/**
 * The data plane, chosen by EPD_TRANSFER_BACKEND: framed TCP with a receiver ack (ours,
 * the default) or SGLang's ZMQ wire. Both are plain class providers so that Nest runs
 * their shutdown hooks; neither opens anything until its first send.
 */
@Module({
  providers: [
    TcpEmbeddingSender,
    ZmqEmbeddingSender,
    {
      provide: EmbeddingTransport,
      inject: [AppConfig, TcpEmbeddingSender, ZmqEmbeddingSender],
      useFactory: (config: AppConfig, tcp: TcpEmbeddingSender, zmq: ZmqEmbeddingSender) =>
        config.transfer.backend === 'zmq' ? zmq : tcp,
    },
  ],
  exports: [EmbeddingTransport],
})
export class TransferModule {}
