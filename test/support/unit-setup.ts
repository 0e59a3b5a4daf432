import { Logger } from '@nestjs/common';

// Unit tests assert on behaviour, not log lines; keep their output readable.
Logger.overrideLogger(['error']);
