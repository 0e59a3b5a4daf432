import { Body, Controller, HttpCode, Post, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { Clock } from '../common/clock';
import { CallDeadline, Deadlines } from '../common/deadline';
import { ErrorsModule } from '../common/errors/errors.module';
import { ZodPipe } from '../common/validation/zod.pipe';
import { AppConfig } from '../config/app-config';
import { loadConfig } from '../config/config.loader';
import { reqIdOnlySchema, type ReqIdRequest } from '../meta-registry/meta.schema';
import { DpType } from '../transport/subjects';
import { LocalReqIds, OwnerRouted } from './owner-routed';
import { OwnerRouter, type RouteOptions } from './owner-router.service';

/** Answers locally for req_ids starting with "here", else as the owner elsewhere would. */
class FakeRouter {
  calls: { dp: string; reqId: string; body: object; deadline: number; options: RouteOptions }[] =
    [];
  async route<T>(
    dp: string,
    reqId: string,
    body: object,
    deadline: number,
    local: () => Promise<T>,
    options: RouteOptions,
  ): Promise<T> {
    this.calls.push({ dp, reqId, body, deadline, options });
    return options.isLocal() ? local() : ({ from: 'owner', req_id: reqId } as T);
  }
}

@Controller()
class ProbeController {
  handled: { reqId: string; deadline: number }[] = [];

  @Post('probe')
  @HttpCode(200)
  @OwnerRouted(DpType.Send, { waitForEncode: true })
  probe(
    @Body(new ZodPipe(reqIdOnlySchema, 'probe request')) body: ReqIdRequest,
    @CallDeadline() deadline: number,
  ): { from: string; req_id: string } {
    this.handled.push({ reqId: body.req_id, deadline });
    return { from: 'handler', req_id: body.req_id };
  }

  @Post('probe_release')
  @HttpCode(200)
  @OwnerRouted(DpType.Release, { forwarded: (reqId) => ({ req_id: reqId, outcome: 'routed' }) })
  release(@Body(new ZodPipe(reqIdOnlySchema, 'release request')) body: ReqIdRequest): object {
    return { req_id: body.req_id, outcome: 'freed' };
  }
}

describe('@OwnerRouted and @CallDeadline: one handler shape for per-req_id calls', () => {
  let app: INestApplication;
  const router = new FakeRouter();
  let probe: ProbeController;

  beforeAll(async () => {
    const config = loadConfig({ EPD_REQ_TIMEOUT_MS: '5000' }).config;
    const moduleRef = await Test.createTestingModule({
      imports: [ErrorsModule],
      controllers: [ProbeController],
      providers: [
        Clock,
        Deadlines,
        { provide: AppConfig, useValue: config },
        { provide: OwnerRouter, useValue: router },
        { provide: LocalReqIds, useValue: { answersFor: (id: string) => id.startsWith('here') } },
      ],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    probe = app.get(ProbeController);
  });

  afterAll(() => app.close());
  beforeEach(() => {
    router.calls = [];
    probe.handled = [];
  });

  it('a req_id held here runs the handler, with the deadline the router was given', async () => {
    const before = Date.now();
    const res = await request(app.getHttpServer())
      .post('/probe')
      .send({ req_id: 'here-1', timeout_ms: 700 });
    expect(res.body).toEqual({ from: 'handler', req_id: 'here-1' });
    expect(router.calls).toHaveLength(1);
    const [call] = router.calls;
    expect(call).toMatchObject({ dp: DpType.Send, reqId: 'here-1' });
    expect(call!.options.waitForEncode).toBe(true);
    expect(probe.handled).toEqual([{ reqId: 'here-1', deadline: call!.deadline }]);
    expect(call!.deadline).toBeGreaterThanOrEqual(before + 700);
    expect(call!.deadline).toBeLessThanOrEqual(Date.now() + 700);
  });

  it("a req_id held elsewhere gets the owner's answer; the handler never runs", async () => {
    const res = await request(app.getHttpServer()).post('/probe').send({ req_id: 'away-1' });
    expect(res.body).toEqual({ from: 'owner', req_id: 'away-1' });
    expect(router.calls[0]!.body).toEqual({ req_id: 'away-1' });
    expect(probe.handled).toEqual([]);
  });

  it("the HTTP twin maps the owner's answer when it says how", async () => {
    const away = await request(app.getHttpServer()).post('/probe_release').send({ req_id: 'b' });
    expect(away.body).toEqual({ req_id: 'b', outcome: 'routed' });
    const here = await request(app.getHttpServer())
      .post('/probe_release')
      .send({ req_id: 'here-b' });
    expect(here.body).toEqual({ req_id: 'here-b', outcome: 'freed' });
  });

  it('an invalid req_id is not routed: the handler pipe answers 400 naming it', async () => {
    const res = await request(app.getHttpServer()).post('/probe').send({ req_id: '' });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain('req_id');
    expect(router.calls).toEqual([]);
  });

  it('a deadline field that is not a number is left to validation, the cap applies', async () => {
    const res = await request(app.getHttpServer())
      .post('/probe')
      .send({ req_id: 'here-2', timeout_ms: 'soon' });
    expect(res.status).toBe(200);
    expect(router.calls[0]!.deadline - Date.now()).toBeGreaterThan(4000);
  });
});
