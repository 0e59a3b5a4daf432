import { readFileSync, writeFileSync } from 'node:fs';
import { onnx } from 'onnx-proto';

/**
 * Writes `to`: the ONNX model at `from` without the reference marker (producer_name, doc
 * string, metadata): what a real tower's file looks like to the service. `to` may be `from`.
 */
export function writeUnmarkedModel(from: string, to: string): string {
  const model = onnx.ModelProto.decode(readFileSync(from));
  model.producerName = 'pytorch';
  model.docString = '';
  model.metadataProps = [];
  writeFileSync(to, onnx.ModelProto.encode(model).finish());
  return to;
}
