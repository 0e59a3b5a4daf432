/** One IPC topic: what the caller sends, and what the handler answers. */
export interface IpcTopic<Request, Reply> {
  request: Request;
  reply: Reply;
}

/**
 * Every topic a DP supervisor and its workers exchange over the fork's IPC channel, with
 * its payload and reply types. transport/ declares its own; a feature declares the topics
 * it serves beside their handler, by augmenting this interface:
 *
 *   declare module '../transport/ipc-topics' {
 *     interface IpcTopics { cache_purge: IpcTopic<void, { purged: number }> }
 *   }
 *
 * `IpcChannel.handle`, `request`, `notify` and the supervisor's `gather` take only these
 * names, and the compiler checks the payload and reply types at both ends.
 */
export interface IpcTopics {
  /** Worker → supervisor, once its handlers serve calls. */
  ready: IpcTopic<{ pid: number }, void>;
  /** Worker → supervisor, while it is not ready: at start and each time a condition settles. */
  waiting: IpcTopic<WorkerWaiting, void>;
}

/** What a worker that is not ready yet reports of itself (its own /health/ready's `waiting_for`). */
export interface WorkerWaiting {
  pid: number;
  /** Each condition it waits for: `pending`, or why it failed. */
  waiting_for: Record<string, string>;
  /** The first condition that failed, `name: reason` (it will then never be ready), or null. */
  failed: string | null;
}

/** A map of topics (IpcTopics, or a test's own). */
export type TopicMap<T> = { [K in keyof T]: IpcTopic<unknown, unknown> };

export type IpcTopicName = keyof IpcTopics;

/** Topics without a payload: reports the supervisor gathers from every worker. */
export type IpcReportTopic = {
  [K in IpcTopicName]: IpcTopics[K]['request'] extends void ? K : never;
}[IpcTopicName];
