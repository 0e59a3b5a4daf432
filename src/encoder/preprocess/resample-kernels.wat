;; The two passes of Pillow's 8-bit bicubic resize (libImaging/Resample.c,
;; ImagingResampleHorizontal_8bpc / ImagingResampleVertical_8bpc), as WebAssembly with
;; 128-bit SIMD, in the WebAssembly text format (assembled into resample-kernels.wasm by `npm run kernels`; loaded by resample.ts).
;; Same integer arithmetic as Pillow, four lanes at a time: each output is
;; `clip8((2^21 + Σ pixel · tap) >> 22)` with 22-bit fixed-point taps, in wrapping int32,
;; so the result is Pillow's to the bit. The scalar JavaScript version spent 37 of the
;; 60 core-ms that preprocessing a 1024×768 photo took.
;; Memory is the caller's (imported), and so is its layout. Both passes read up to 15 bytes past their source
;; and write up to 15 bytes past their output (the caller leaves that much slack), so
;; that every row is handled in whole vectors; a byte written past the end of a row is
;; rewritten when the next row is computed.
(module
  (import "env" "memory" (memory 1))

  ;; clip8 on four lanes: (acc >> 22) clamped to 0..255.
  (func $clip (param $acc v128) (result v128)
    (i32x4.min_s
      (i32x4.max_s (i32x4.shr_s (local.get $acc) (i32.const 22)) (v128.const i32x4 0 0 0 0))
      (v128.const i32x4 255 255 255 255)))

  ;; Rows of packed RGB, inW wide, resampled along x to outW. Per output pixel: the taps
  ;; of its window, R, G, B (and a spare lane) accumulated together, for two rows at a
  ;; time (they share the window and the taps; an odd last row is paired with itself).
  ;; bounds: [xmin, count] per output x (int32); taps: outW × ksize (int32).
  (func (export "horizontal")
    (param $src i32) (param $inStride i32) (param $rows i32) (param $outW i32)
    (param $out i32) (param $bounds i32) (param $taps i32) (param $ksize i32)
    (local $y i32) (local $xx i32) (local $p i32) (local $q i32) (local $n i32) (local $k i32)
    (local $o i32) (local $o2 i32) (local $next i32) (local $tap v128)
    (local $acc v128) (local $acc2 v128)
    (block $rowsDone
      (loop $row
        (br_if $rowsDone (i32.ge_u (local.get $y) (local.get $rows)))
        ;; next = min(y + 1, rows - 1)
        (local.set $next (i32.add (local.get $y) (i32.const 1)))
        (if (i32.ge_u (local.get $next) (local.get $rows))
          (then (local.set $next (local.get $y))))
        (local.set $o (i32.add (local.get $out) (i32.mul (local.get $y) (i32.mul (local.get $outW) (i32.const 3)))))
        (local.set $o2 (i32.add (local.get $out) (i32.mul (local.get $next) (i32.mul (local.get $outW) (i32.const 3)))))
        (local.set $xx (i32.const 0))
        (block $pixelsDone
          (loop $pixel
            (br_if $pixelsDone (i32.ge_u (local.get $xx) (local.get $outW)))
            ;; p = src + y·inStride + xmin·3 (q: the same in the paired row); k = taps + xx·ksize·4
            (local.set $p
              (i32.add
                (i32.add (local.get $src) (i32.mul (local.get $y) (local.get $inStride)))
                (i32.mul
                  (i32.load (i32.add (local.get $bounds) (i32.shl (local.get $xx) (i32.const 3))))
                  (i32.const 3))))
            (local.set $q
              (i32.add (local.get $p)
                (i32.mul (i32.sub (local.get $next) (local.get $y)) (local.get $inStride))))
            (local.set $n
              (i32.load offset=4
                (i32.add (local.get $bounds) (i32.shl (local.get $xx) (i32.const 3)))))
            (local.set $k
              (i32.add (local.get $taps)
                (i32.shl (i32.mul (local.get $xx) (local.get $ksize)) (i32.const 2))))
            (local.set $acc (v128.const i32x4 0x200000 0x200000 0x200000 0x200000))
            (local.set $acc2 (local.get $acc))
            (block $tapsDone
              (loop $tap
                (br_if $tapsDone (i32.eqz (local.get $n)))
                (local.set $tap (i32x4.splat (i32.load (local.get $k))))
                (local.set $acc
                  (i32x4.add (local.get $acc)
                    (i32x4.mul
                      (i32x4.extend_low_i16x8_u (v128.load8x8_u (local.get $p)))
                      (local.get $tap))))
                (local.set $acc2
                  (i32x4.add (local.get $acc2)
                    (i32x4.mul
                      (i32x4.extend_low_i16x8_u (v128.load8x8_u (local.get $q)))
                      (local.get $tap))))
                (local.set $p (i32.add (local.get $p) (i32.const 3)))
                (local.set $q (i32.add (local.get $q) (i32.const 3)))
                (local.set $k (i32.add (local.get $k) (i32.const 4)))
                (local.set $n (i32.sub (local.get $n) (i32.const 1)))
                (br $tap)))
            ;; Four bytes out per row: R, G, B, and one the next pixel overwrites; except at
            ;; the end of the first row, whose spare byte would land on the paired row's
            ;; first pixel, already written.
            (local.set $acc
              (i16x8.narrow_i32x4_s (call $clip (local.get $acc)) (call $clip (local.get $acc2))))
            (local.set $acc (i8x16.narrow_i16x8_u (local.get $acc) (local.get $acc)))
            (if (i32.eq (local.get $xx) (i32.sub (local.get $outW) (i32.const 1)))
              (then
                (v128.store16_lane 0 (local.get $o) (local.get $acc))
                (v128.store8_lane 2 (i32.add (local.get $o) (i32.const 2)) (local.get $acc)))
              (else (v128.store32_lane 0 (local.get $o) (local.get $acc))))
            (v128.store32_lane 1 (local.get $o2) (local.get $acc))
            (local.set $o (i32.add (local.get $o) (i32.const 3)))
            (local.set $o2 (i32.add (local.get $o2) (i32.const 3)))
            (local.set $xx (i32.add (local.get $xx) (i32.const 1)))
            (br $pixel)))
        (local.set $y (i32.add (local.get $y) (i32.const 2)))
        (br $row)))
  )

  ;; Rows of 'stride' bytes resampled along y to outH rows: every output row is a sum of
  ;; whole source rows, 16 bytes at a time in four int32x4 accumulators.
  ;; bounds: [ymin, count] per output row, ymin relative to src; taps: outH × ksize.
  (func (export "vertical")
    (param $src i32) (param $stride i32) (param $outH i32) (param $out i32)
    (param $bounds i32) (param $taps i32) (param $ksize i32)
    (local $yy i32) (local $i i32) (local $base i32) (local $p i32) (local $n i32)
    (local $k0 i32) (local $k i32) (local $left i32) (local $o i32)
    (local $v v128) (local $lo v128) (local $hi v128) (local $tap v128)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (block $rowsDone
      (loop $row
        (br_if $rowsDone (i32.ge_u (local.get $yy) (local.get $outH)))
        (local.set $base
          (i32.add (local.get $src)
            (i32.mul
              (i32.load (i32.add (local.get $bounds) (i32.shl (local.get $yy) (i32.const 3))))
              (local.get $stride))))
        (local.set $n
          (i32.load offset=4 (i32.add (local.get $bounds) (i32.shl (local.get $yy) (i32.const 3)))))
        (local.set $k0
          (i32.add (local.get $taps)
            (i32.shl (i32.mul (local.get $yy) (local.get $ksize)) (i32.const 2))))
        (local.set $o (i32.add (local.get $out) (i32.mul (local.get $yy) (local.get $stride))))
        (local.set $i (i32.const 0))
        (block $colsDone
          (loop $col
            (br_if $colsDone (i32.ge_u (local.get $i) (local.get $stride)))
            (local.set $a0 (v128.const i32x4 0x200000 0x200000 0x200000 0x200000))
            (local.set $a1 (local.get $a0))
            (local.set $a2 (local.get $a0))
            (local.set $a3 (local.get $a0))
            (local.set $p (i32.add (local.get $base) (local.get $i)))
            (local.set $k (local.get $k0))
            (local.set $left (local.get $n))
            (block $tapsDone
              (loop $tap
                (br_if $tapsDone (i32.eqz (local.get $left)))
                (local.set $v (v128.load (local.get $p)))
                (local.set $tap (i32x4.splat (i32.load (local.get $k))))
                (local.set $lo (i16x8.extend_low_i8x16_u (local.get $v)))
                (local.set $hi (i16x8.extend_high_i8x16_u (local.get $v)))
                (local.set $a0 (i32x4.add (local.get $a0)
                  (i32x4.mul (i32x4.extend_low_i16x8_u (local.get $lo)) (local.get $tap))))
                (local.set $a1 (i32x4.add (local.get $a1)
                  (i32x4.mul (i32x4.extend_high_i16x8_u (local.get $lo)) (local.get $tap))))
                (local.set $a2 (i32x4.add (local.get $a2)
                  (i32x4.mul (i32x4.extend_low_i16x8_u (local.get $hi)) (local.get $tap))))
                (local.set $a3 (i32x4.add (local.get $a3)
                  (i32x4.mul (i32x4.extend_high_i16x8_u (local.get $hi)) (local.get $tap))))
                (local.set $p (i32.add (local.get $p) (local.get $stride)))
                (local.set $k (i32.add (local.get $k) (i32.const 4)))
                (local.set $left (i32.sub (local.get $left) (i32.const 1)))
                (br $tap)))
            (v128.store (i32.add (local.get $o) (local.get $i))
              (i8x16.narrow_i16x8_u
                (i16x8.narrow_i32x4_s (call $clip (local.get $a0)) (call $clip (local.get $a1)))
                (i16x8.narrow_i32x4_s (call $clip (local.get $a2)) (call $clip (local.get $a3)))))
            (local.set $i (i32.add (local.get $i) (i32.const 16)))
            (br $col)))
        (local.set $yy (i32.add (local.get $yy) (i32.const 1)))
        (br $row)))
  )
)
