import type { Request, Response } from 'express';

/** Aborts when the HTTP client goes away before the answer, so its wait is freed at once. */
export function abortOnDisconnect(req: Request, res: Response): AbortSignal {
  const controller = new AbortController();
  req.socket.once('close', () => {
    if (!res.writableEnded) controller.abort();
  });
  return controller.signal;
}
