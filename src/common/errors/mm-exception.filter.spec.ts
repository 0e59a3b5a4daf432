import { ArgumentsHost, NotFoundException, ServiceUnavailableException } from '@nestjs/common';
import { NatsContext } from '@nestjs/microservices';
import { TimeoutError, firstValueFrom, type Observable } from 'rxjs';
import { BadRequestError, MMError } from './mm-error';
import { MMExceptionFilter } from './mm-exception.filter';

function rpcHost(subject: string, data: unknown): ArgumentsHost {
  const ctx = new NatsContext([subject, undefined]);
  return {
    getType: () => 'rpc',
    switchToRpc: () => ({ getData: () => data, getContext: () => ctx }),
  } as unknown as ArgumentsHost;
}

function httpHost(routePath: string, body: unknown, params: Record<string, string> = {}) {
  const res = {
    headersSent: false,
    statusCode: 0,
    payload: undefined as unknown,
    contentType: '',
    type(t: string) {
      this.contentType = t;
      return this;
    },
    status(code: number) {
      this.statusCode = code;
      return this;
    },
    json(payload: unknown) {
      this.payload = payload;
      return this;
    },
  };
  const req = { route: { path: routePath }, path: routePath, body, params };
  const host = {
    getType: () => 'http',
    switchToHttp: () => ({ getRequest: () => req, getResponse: () => res }),
  } as unknown as ArgumentsHost;
  return { host, res };
}

async function rpcError(filter: MMExceptionFilter, err: unknown, host: ArgumentsHost) {
  const out = filter.catch(err, host) as Observable<never>;
  return firstValueFrom(out).catch((e: unknown) => e);
}

describe('MMExceptionFilter', () => {
  const filter = new MMExceptionFilter();

  describe('over NATS (rpc)', () => {
    it('maps a TimeoutError in wait_metadata to 504 "encode metadata not ready" with the req_id', async () => {
      const body = await rpcError(
        filter,
        new TimeoutError(),
        rpcHost('epd.v1.wait_metadata', { req_id: 'r1' }),
      );
      expect(body).toEqual({
        status: 'error',
        code: 504,
        type: 'metadata_not_ready',
        message: 'encode metadata not ready',
        req_id: 'r1',
      });
    });

    it('maps a TimeoutError elsewhere to that operation’s 504', async () => {
      const body = await rpcError(
        filter,
        new TimeoutError(),
        rpcHost('epd.v1.rank.0.encode', { req_id: 'r1' }),
      );
      expect(body).toMatchObject({ code: 504, message: 'encoder batch timed out' });
      const other = await rpcError(filter, new TimeoutError(), rpcHost('epd.v1.send', {}));
      expect(other).toEqual({
        status: 'error',
        code: 504,
        type: 'deadline_exceeded',
        message: 'send timed out',
        req_id: null,
      });
    });

    it('keeps an MMError’s code and message', async () => {
      const body = await rpcError(
        filter,
        new BadRequestError('invalid x: y'),
        rpcHost('epd.v1.has_metadata', { req_id: 7 }),
      );
      expect(body).toEqual({
        status: 'error',
        code: 400,
        type: 'invalid_request',
        message: 'invalid x: y',
        req_id: null,
      });
    });

    it('hides the internals of unexpected errors behind a 500', async () => {
      const body = await rpcError(
        filter,
        new Error('secret stack detail'),
        rpcHost('epd.v1.release', { req_id: 'r' }),
      );
      expect(body).toEqual({
        status: 'error',
        code: 500,
        type: 'internal',
        message: 'internal error',
        req_id: 'r',
      });
    });
  });

  describe('over HTTP', () => {
    it('maps a TimeoutError on /scheduler_receive_meta_data to 504 with the SGLang body', () => {
      const { host, res } = httpHost('/scheduler_receive_meta_data', { req_id: 'r9' });
      filter.catch(new TimeoutError(), host);
      expect(res.statusCode).toBe(504);
      expect(res.payload).toEqual({
        status: 'error',
        code: 504,
        type: 'metadata_not_ready',
        message: 'encode metadata not ready',
        req_id: 'r9',
      });
    });

    it('keeps Nest HttpExceptions’ status and takes req_id from route params', () => {
      const { host, res } = httpHost('/admin/registry/:req_id', undefined, { req_id: 'p1' });
      filter.catch(new NotFoundException('Cannot GET /nope'), host);
      expect(res.statusCode).toBe(404);
      expect(res.payload).toMatchObject({ message: 'Cannot GET /nope', req_id: 'p1' });
    });

    it('answers MMError with its own code', () => {
      const { host, res } = httpHost('/admin/registry', {});
      filter.catch(new MMError('metadata registry is full', 507), host);
      expect(res.statusCode).toBe(507);
      // JSON even on routes that answer text on success (start_profile).
      expect(res.contentType).toBe('application/json');
      filter.catch(new ServiceUnavailableException(), host);
      expect(res.statusCode).toBe(503);
    });

    it('500 for unknown errors, without their message', () => {
      const { host, res } = httpHost('/x', {});
      filter.catch(new TypeError('cannot read properties of undefined'), host);
      expect(res.statusCode).toBe(500);
      expect(res.payload).toMatchObject({ message: 'internal error' });
    });
  });
});
