import { ProcessOwner } from '../meta-registry/process-owner';
import { restartMemoryFor } from '../meta-registry/restart-memory';
import { Clock } from '../common/clock';
import { loadConfig } from '../config/config.loader';
import { MemoryMetaStore } from '../meta-registry/memory-meta-store';
import { MetaRegistry } from '../meta-registry/meta-registry.service';
import { ReqStateStore } from '../requests/req-state.store';
import { RequestLifecycle } from '../requests/request-lifecycle.service';
import { stagedEmbedding } from '../requests/testing';
import { EmbeddingTransport } from '../transfer/embedding-transport';
import type { Ack } from '../transfer/frame';
import { DeliveryWire } from './delivery-wire';
import { LifecycleEvents } from '../common/lifecycle-events';
import { DeliveryService } from './delivery.service';
import { DestinationPolicy } from './destination-policy';

class NoTransport extends EmbeddingTransport {
  send(): Promise<Ack> {
    return Promise.reject(new Error('not expected to send'));
  }
}

/**
 * A `send` that got its state, then waited for the destination policy while the state
 * ended: found by the rolling-restart test as a 500 `internal` ("addDestination not
 * allowed in released"). Handed to the object store, it is a 503 `shutting_down` (the
 * forwarding peer reads the owner record again); released, the documented 500.
 */
describe('DeliveryService: a send whose state ends while its policy check runs', () => {
  const setup = () => {
    const { config } = loadConfig({ EPD_STAGING_MAX_BYTES: '100000' });
    const clock = new Clock();
    const events = new LifecycleEvents();
    const states = new ReqStateStore(config, clock, events);
    const registry = new MetaRegistry(
      new MemoryMetaStore(100),
      config,
      clock,
      ProcessOwner.single(config.instance.id),
      restartMemoryFor(config, clock, false),
    );
    let resume!: () => void;
    const policy = new DestinationPolicy(config);
    policy.check = () => new Promise<void>((r) => (resume = r));
    const delivery = new DeliveryService(
      config,
      clock,
      states,
      new DeliveryWire(config, new NoTransport(), policy, events),
      new RequestLifecycle(states, registry, events),
      policy,
    );
    const state = states.begin('r', 'image', 0, 1);
    states.reserve(state, 400);
    states.stage(state, stagedEmbedding(400));
    states.finishEncode(state);
    const sending = delivery.send(
      { req_id: 'r', prefill_host: '127.0.0.1', embedding_port: 9 },
      Date.now() + 5000,
    );
    return { states, state, sending, resume: () => resume() };
  };

  it('answers 503 shutting_down when the state was handed to the object store meanwhile', async () => {
    const { states, state, sending, resume } = setup();
    states.handOff(state);
    resume();
    await expect(sending).rejects.toMatchObject({ code: 503, type: 'shutting_down' });
  });

  it('answers the documented release error when it was released meanwhile', async () => {
    const { states, sending, resume } = setup();
    states.release('r');
    resume();
    await expect(sending).rejects.toMatchObject({
      code: 500,
      message: expect.stringContaining('released'),
    });
  });
});
