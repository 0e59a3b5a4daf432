/** Audio decoding, as other features use it: the surface of media/audio/. */
export { AudioDecodeError } from './audio/common';
export { audioInfo, decodeAudio } from './audio/decode';
