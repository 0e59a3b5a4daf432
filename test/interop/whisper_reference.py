"""Whisper log-mel features as transformers' WhisperFeatureExtractor computes them (its
numpy path): a port written from `feature_extraction_whisper.py` and `audio_utils.py`
(mel_filter_bank, window_function, spectrogram) as they stand at huggingface/transformers
commit 2b897410; no transformers install.

usage: whisper_reference.py OURS.npy N_MELS AUDIO
AUDIO: a 16 kHz mono PCM16 .wav (read with Python's wave module), or raw float32
little-endian 16 kHz samples (.f32), of any length. The audio is
cut into consecutive 30 s windows, each zero-padded to 480000 samples (padding=
"max_length"), as the encoder does for long audio. Prints one JSON line: windows, the
valid mel frames and Qwen2-Audio tokens per window, and max |diff| against OURS.npy
(float32 [windows, n_mels, 3000]).
"""
import json
import sys
import wave

import numpy as np

SR, N_FFT, HOP, CHUNK = 16000, 400, 160, 480000


def hertz_to_mel(freq):
    min_log_hertz, min_log_mel, logstep = 1000.0, 15.0, 27.0 / np.log(6.4)
    mels = 3.0 * freq / 200.0
    if isinstance(freq, np.ndarray):
        log_region = freq >= min_log_hertz
        mels[log_region] = min_log_mel + np.log(freq[log_region] / min_log_hertz) * logstep
    elif freq >= min_log_hertz:
        mels = min_log_mel + np.log(freq / min_log_hertz) * logstep
    return mels


def mel_to_hertz(mels):
    min_log_hertz, min_log_mel, logstep = 1000.0, 15.0, np.log(6.4) / 27.0
    freq = 200.0 * mels / 3.0
    log_region = mels >= min_log_mel
    freq[log_region] = min_log_hertz * np.exp(logstep * (mels[log_region] - min_log_mel))
    return freq


def mel_filter_bank(num_frequency_bins, num_mel_filters, min_frequency, max_frequency, sampling_rate):
    mel_min, mel_max = hertz_to_mel(min_frequency), hertz_to_mel(max_frequency)
    mel_freqs = np.linspace(mel_min, mel_max, num_mel_filters + 2)
    filter_freqs = mel_to_hertz(mel_freqs)
    fft_freqs = np.linspace(0, sampling_rate // 2, num_frequency_bins)
    filter_diff = np.diff(filter_freqs)
    slopes = np.expand_dims(filter_freqs, 0) - np.expand_dims(fft_freqs, 1)
    down_slopes = -slopes[:, :-2] / filter_diff[:-1]
    up_slopes = slopes[:, 2:] / filter_diff[1:]
    bank = np.maximum(np.zeros(1), np.minimum(down_slopes, up_slopes))
    enorm = 2.0 / (filter_freqs[2 : num_mel_filters + 2] - filter_freqs[:num_mel_filters])
    return bank * np.expand_dims(enorm, 0)


def log_mel(waveform, mel_filters):
    window = np.hanning(N_FFT + 1)[:-1]
    padded = np.pad(waveform.astype(np.float64), (N_FFT // 2, N_FFT // 2), mode="reflect")
    num_frames = 1 + (padded.size - N_FFT) // HOP
    spec = np.empty((num_frames, N_FFT // 2 + 1), dtype=np.complex128)
    for t in range(num_frames):
        spec[t] = np.fft.rfft(padded[t * HOP : t * HOP + N_FFT] * window, n=N_FFT)
    power = (np.abs(spec, dtype=np.float64) ** 2.0).T
    mel = np.maximum(1e-10, np.dot(mel_filters.T, power))
    log_spec = np.log10(mel).astype(np.float32)[:, :-1]
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


def tokens(frames):
    return ((frames - 1) // 2 + 1 - 2) // 2 + 1


def main():
    ours = np.load(sys.argv[1])
    n_mels = int(sys.argv[2])
    path = sys.argv[3]
    if path.endswith(".wav"):
        with wave.open(path) as w:
            assert w.getframerate() == SR and w.getnchannels() == 1 and w.getsampwidth() == 2
            samples = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2") / 32768.0
    else:
        samples = np.fromfile(path, dtype="<f4")
    if ours.ndim == 2:  # epd-embed --patches writes [windows, n_mels * 3000]
        ours = ours.reshape(ours.shape[0], n_mels, -1)
    filters = mel_filter_bank(N_FFT // 2 + 1, n_mels, 0.0, 8000.0, SR)
    feats, frames = [], []
    for start in range(0, max(len(samples), 1), CHUNK):
        chunk = samples[start : start + CHUNK]
        frames.append(int(np.ceil(len(chunk) / HOP)))
        feats.append(log_mel(np.pad(chunk, (0, CHUNK - len(chunk))), filters))
    ref = np.stack(feats)
    out = {
        "windows": len(feats),
        "frames": frames,
        "tokens": [max(0, tokens(f)) for f in frames],
        "shape": list(ours.shape),
    }
    if ours.shape == ref.shape:
        out["max"] = float(np.abs(ours.astype(np.float64) - ref).max())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
