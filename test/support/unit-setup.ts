import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';

// Unit tests assert on behaviour, not log lines; keep their output readable.
Logger.overrideLogger(['error']);

// Nothing a unit test starts writes under the home directory (restart ledgers, profiles).
process.env.XDG_STATE_HOME = join(tmpdir(), 'epd-unit-state');
