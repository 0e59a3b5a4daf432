import { startTestApp } from './support/app';

/**
 * worker-terminated-mid-native: closing the app while the inference worker was still
 * inside ONNX Runtime (loading the models right after start, or a forward) terminated the
 * thread mid-native-call, and node-addon-api threw into the dying environment: the whole
 * process aborted with `terminate called after throwing an instance of 'Napi::Error'`
 * (reproduced 2 of 2 runs with this test before the fix). The pools now close gracefully.
 * The assertion is that this jest process survives to count the test.
 */
it('closing the app at any moment after start never aborts the process', async () => {
  for (let i = 0; i < 8; i++) {
    const t = await startTestApp();
    await new Promise((r) => setTimeout(r, (i * 41) % 250));
    await t.close();
  }
});
