import { LifecycleEvents } from './lifecycle-events';

describe('LifecycleEvents (the typed event map)', () => {
  it('tells every listener of an event, in order, even when one throws; removal works', () => {
    const events = new LifecycleEvents();
    const seen: string[] = [];
    events.on('wait.completed', (outcome, s) => seen.push(`a ${outcome} ${s}`));
    events.on('wait.completed', () => {
      throw new Error('a broken listener');
    });
    const off = events.on('wait.completed', (outcome) => seen.push(`c ${outcome}`));
    events.on('forward.completed', (requests, items) => seen.push(`f ${requests}/${items}`));
    events.emit('wait.completed', 'ok', 0.5);
    expect(seen).toEqual(['a ok 0.5', 'c ok']);
    expect(events.count('wait.completed')).toBe(3);
    off();
    events.emit('wait.completed', 'timeout', 1);
    events.emit('forward.completed', 3, 5);
    expect(seen).toEqual(['a ok 0.5', 'c ok', 'a timeout 1', 'f 3/5']);
    expect(events.count('wait.completed')).toBe(2);
    // An event nobody follows costs a lookup.
    expect(events.count('object-store.op')).toBe(0);
    expect(() => events.emit('object-store.op', 'get', 0.1)).not.toThrow();
  });
});
