import type { InferenceSession } from 'onnxruntime-node';
import { CONTRACT_ERROR_PREFIX, checkModelContract } from './model-contract-check';

const t = (
  name: string,
  type: string,
  shape: (number | string)[],
): InferenceSession.ValueMetadata =>
  ({ name, isTensor: true, type, shape }) as InferenceSession.ValueMetadata;

describe('checkModelContract', () => {
  it('accepts the contract, with symbolic or undeclared dimensions', () => {
    expect(() =>
      checkModelContract(
        'vision',
        'v.onnx',
        [t('pixel_values', 'float32', ['n', 1176]), t('grid_thw', 'int64', ['i', 3])],
        [t('embeds', 'float32', ['t', 1024])],
        1176,
      ),
    ).not.toThrow();
    // Qwen3-VL's 16-pixel patches: 3 × 2 × 16 × 16 values a row.
    expect(() =>
      checkModelContract(
        'vision',
        'v.onnx',
        [t('pixel_values', 'float32', ['n', 1536])],
        [t('embeds', 'float32', ['t', 8192])],
        1536,
      ),
    ).not.toThrow();
    expect(() =>
      checkModelContract('audio', 'a.onnx', [t('x', 'float32', [])], [t('y', 'float32', [])], 0),
    ).not.toThrow();
  });

  it('refuses a mismatch, naming the variable, every problem, and what the file declares', () => {
    expect(() =>
      checkModelContract(
        'vision',
        'models/audio-encoder.onnx',
        [t('input_features', 'float32', ['n', 640])],
        [t('embeds', 'float16', ['t', 512])],
        1176,
      ),
    ).toThrow(
      `${CONTRACT_ERROR_PREFIX}: vision model models/audio-encoder.onnx (EPD_MODEL_PATH): ` +
        'input 0 input_features has 640 on axis 1, expected 1176; output 0 embeds is float16, expected float32. ' +
        'Expected float32 [patches, 1176] (+ optional int64 grid_thw [images, 3]) → float32 [tokens, dim]; ' +
        'it declares inputs {input_features: float32 [n, 640]} and outputs {embeds: float16 [t, 512]}.',
    );
    expect(() =>
      checkModelContract(
        'audio',
        'a.onnx',
        [t('x', 'float32', ['w', 128, 640]), t('y', 'int64', [1])],
        [t('o', 'float32', ['t', 'd'])],
        0,
      ),
    ).toThrow(
      '(EPD_AUDIO_MODEL_PATH): input 0 x has 640 on axis 2, expected 3000; output 0 o has rank 2, expected 3; it has 2 inputs, expected at most 1',
    );
    expect(() => checkModelContract('vision', 'v', [], [], 1176)).toThrow(
      'input 0 is missing; output 0 is missing',
    );
    // A Qwen2-VL tower where the model directory says 16-pixel patches.
    expect(() =>
      checkModelContract(
        'vision',
        'v',
        [t('pixel_values', 'float32', ['n', 1176])],
        [t('e', 'float32', ['t', 'd'])],
        1536,
      ),
    ).toThrow('input 0 pixel_values has 1176 on axis 1, expected 1536');
  });

  it("checks a tiling family's slot: [tiles, 3, tile, tile] in, [tiles, tokens per tile, dim] out", () => {
    const tiling = { tile: 448, tokensPerTile: 256 };
    const input = t('pixel_values', 'float32', ['tiles', 3, 448, 448]);
    expect(() =>
      checkModelContract(
        'vision',
        'i.onnx',
        [input],
        [t('e', 'float32', ['tiles', 256, 896])],
        602112,
        tiling,
      ),
    ).not.toThrow();
    expect(() =>
      checkModelContract(
        'vision',
        'i.onnx',
        [input],
        [t('e', 'float32', ['n', 896])],
        602112,
        tiling,
      ),
    ).not.toThrow();
    let message = '';
    try {
      checkModelContract(
        'vision',
        'i.onnx',
        [t('pixel_values', 'float32', ['tiles', 3, 336, 336]), t('g', 'int64', ['i', 3])],
        [t('e', 'float32', ['tiles', 144, 896])],
        602112,
        tiling,
      );
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('input 0 pixel_values has 336 on axis 2, expected 448');
    expect(message).toContain('output 0 e has 144 on axis 1, expected 256');
    expect(message).toContain('it has 2 inputs, expected 1');
    expect(message).toContain('Expected float32 [tiles, 3, 448, 448] → float32 [tiles, 256, dim]');
  });
});
