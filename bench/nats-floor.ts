/**
 * Child process of encode-cost: the least a NATS encode responder does on its main thread,
 * as a floor for the service's. Both modes answer every request on a subject by parsing
 * it as JSON, decoding each base64 data URI in `mm_items` into bytes (what the wire format
 * costs any encoder), and replying with a small JSON object:
 *   raw  — a bare nats.js subscription;
 *   nest — a bare NestJS microservice: Nest's own NATS transport and a @MessagePattern
 *          handler, the shape the service is built in (requests in Nest's envelope).
 * The service's CPU per encode beyond the bare chain and the floor is its own doing.
 *
 * Usage: nats-floor <raw|nest> <nats-url> <subject>; prints 'ready' once subscribed.
 */
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  type MicroserviceOptions,
  MessagePattern,
  Payload,
  Transport,
} from '@nestjs/microservices';
import { connect } from '@nats-io/transport-node';

const [mode, url, subject] = process.argv.slice(2) as [string, string, string];

/** The request's images as bytes, and the small answer a floor gives. */
function answer(req: { req_id?: string; mm_items?: string[] }): { req_id?: string; bytes: number } {
  let bytes = 0;
  for (const item of req.mm_items ?? [])
    bytes += Buffer.from(item.slice(item.indexOf(',') + 1), 'base64').length;
  return { req_id: req.req_id, bytes };
}

@Controller()
class FloorController {
  @MessagePattern(subject)
  encode(@Payload() req: { req_id?: string; mm_items?: string[] }) {
    return answer(req);
  }
}

@Module({ controllers: [FloorController] })
class FloorModule {}

async function raw(): Promise<void> {
  const nc = await connect({ servers: url });
  const encoder = new TextEncoder();
  nc.subscribe(subject, {
    callback: (_err, msg) =>
      void msg.respond(encoder.encode(JSON.stringify({ response: answer(msg.json()) }))),
  });
  await nc.flush();
}

async function nest(): Promise<void> {
  const app = await NestFactory.createMicroservice<MicroserviceOptions>(FloorModule, {
    transport: Transport.NATS,
    options: { servers: [url] },
    logger: ['error'],
  });
  await app.listen();
}

void (mode === 'nest' ? nest() : raw()).then(() => process.stdout.write('ready\n'));
