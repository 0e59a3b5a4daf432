import { canvasBombGif } from './support/amplification';
import { startServiceProcess } from './support/service-process';
it('probe', async () => {
  const svc = await startServiceProcess({
    EPD_NATS_URL: process.env.EPD_TEST_NATS_URL!,
    EPD_SUBJECT_PREFIX: 'probe' + Date.now(),
    MALLOC_ARENA_MAX: '2',
    EXP_MEM: '1',
  });
  console.log('idle rss', svc.rss() >> 20);
  const gif = canvasBombGif(1000, 1000, 26);
  for (let i = 0; i < 2; i++) {
    const r = await fetch(`${svc.url}/encode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        req_id: 'a' + i,
        modality: 'video',
        mm_items: ['data:image/gif;base64,' + gif.toString('base64')],
        num_parts: 1,
        part_idx: 0,
      }),
    });
    console.log(r.status, 'peak', svc.peakRss() >> 20);
    await fetch(`${svc.url}/admin/requests/a${i}/release`, { method: 'POST' });
    await new Promise((r) => setTimeout(r, 3000));
    console.log('after rss', svc.rss() >> 20);
  }
  console.log(
    svc
      .output()
      .split('\n')
      .filter((l) => l.includes('EXP'))
      .slice(-20)
      .join('\n'),
  );
  await svc.stop();
}, 60000);
