import type { ForwardResult, ForwardTask, ModelInfo } from './forward.types';
import type { SlabUsage } from './staging-slab';
import type { ServedModel } from './model-marker';

/** The model runtime behind the scheduler (DI token). Implementations: ONNX Runtime in a worker thread. */
export abstract class EncoderBackend {
  /** Loads the models (once) and reports their output widths. */
  abstract info(): Promise<ModelInfo>;
  /** One forward over every part; resolves with one output per part, in order. */
  abstract forward(task: ForwardTask): Promise<ForwardResult>;
  /** The models this process serves: name, family, file, and whether each is a stand-in. */
  get models(): readonly ServedModel[] {
    return [];
  }
  /** The operating-system thread ids of the threads that run the model (JS side). */
  get threadIds(): number[] {
    return [];
  }
  /** The staging slab's size and use, when staged embeddings are written into one. */
  get stagingSlab(): SlabUsage | undefined {
    return undefined;
  }
}
