/*
 * RICE_1 coder and decoder for 16- and 32-bit integer tiles, in the bit layout of CFITSIO's
 * fits_rcomp / fits_rcomp_short (the FITS tiled-image convention that fpack/funpack, astropy and
 * fitsio read), plus the FITS checksum sum.
 *
 * Why our own: CFITSIO's coder (shipped inside astropy) is ~78% of a CCD's edge CPU, and reaching
 * it from Python costs the numpy and astropy imports (most of a short command's wall time). This
 * one produces the same bytes (same block-size heuristic, same bit order) but
 *   - reads the FITS big-endian pixels directly (no byte-swapped copy of the image first),
 *   - appends each pixel's code (unary high part and low bits together) to a 64-bit register in
 *     one step and writes 32 bits at a time, instead of one byte at a time,
 *   - codes a whole image HDU (every tile, the descriptor table and the heap) in one call,
 *   - releases the GIL, so threads of one process code amplifiers on all cores.
 *
 * Stream format (per tile): the first pixel as raw bits (32 or 16); then for each block of
 * `blocksize` pixels, the differences of adjacent pixels (wrapping at the pixel width) mapped to
 * unsigned values (zig-zag), coded with a split code fs+1 (5 bits for 32-bit pixels, 4 for
 * 16-bit) then, per value, (v >> fs) zeros, a one and the low fs bits; code 0 marks an all-zero
 * block, code fsmax+1 a block stored as raw pixel-width values. Bits are written most
 * significant first; the last byte is zero-padded.
 *
 * The decoder never reads outside its tile: a stream that runs past its end, or uses a split
 * code that cannot occur, is an error naming the tile (the caller turns it into CorruptFile).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BLOCKSIZE 256

/* Code parameters per pixel width (CFITSIO's fsbits, fsmax, bbits for bsize 4 and 2). */
typedef struct {
    int bytepix, fsbits, fsmax, bbits;
} Width;

static const Width W32 = {4, 5, 25, 32};
static const Width W16 = {2, 4, 14, 16};

static const Width *width_of(int bytepix) {
    return bytepix == 4 ? &W32 : bytepix == 2 ? &W16 : NULL;
}

/* --- big-endian helpers --------------------------------------------------------------------- */

static inline void store32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline uint32_t load32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
           (uint32_t)p[3];
}

static inline uint32_t load_px(const uint8_t *p, int bytepix) {
    return bytepix == 4 ? load32(p) : (((uint32_t)p[0] << 8) | (uint32_t)p[1]);
}

static inline void store_px(uint8_t *p, uint32_t v, int bytepix) {
    if (bytepix == 4) {
        store32(p, v);
    } else {
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
    }
}

/* --- encoder -------------------------------------------------------------------------------- */

typedef struct {
    uint8_t *out;
    uint64_t acc; /* pending bits are the low `n` bits */
    int n;        /* always < 32 between calls */
} BitWriter;

/* Append the low `nb` (1..32) bits of `v`. */
static inline void put(BitWriter *w, uint32_t v, int nb) {
    w->acc = (w->acc << nb) | ((uint64_t)v & ((UINT64_C(1) << nb) - 1));
    w->n += nb;
    if (w->n >= 32) {
        w->n -= 32;
        store32(w->out, (uint32_t)(w->acc >> w->n));
        w->out += 4;
    }
}

static inline void flush(BitWriter *w) {
    while (w->n > 0) {
        int take = w->n >= 8 ? 8 : w->n;
        uint32_t byte = (uint32_t)(w->acc >> (w->n - take)) & ((1u << take) - 1);
        *w->out++ = (uint8_t)(byte << (8 - take));
        w->n -= take;
    }
}

/* Largest output for `nx` pixels: every block raw, plus its code, the first pixel, padding. */
static Py_ssize_t bound(Py_ssize_t nx, int blocksize, const Width *wd) {
    Py_ssize_t blocks = (nx + blocksize - 1) / blocksize;
    return wd->bytepix + nx * wd->bytepix + (blocks * wd->fsbits + 7) / 8 + 8;
}

/* zig-zag of a difference wrapped to the pixel width (CFITSIO's int or short): ~(2d) if d < 0 */
static inline uint32_t zigzag(uint32_t d, int bytepix) {
    if (bytepix == 4) return (d << 1) ^ (uint32_t)((int32_t)d >> 31);
    d &= 0xFFFFu;
    return ((d << 1) ^ (uint32_t)((int32_t)(d << 16) >> 31)) & 0xFFFFu;
}

/* Code `nx` contiguous big-endian pixels at `src` into `dst`; returns bytes written. Inlined
 * into one copy per pixel width (rcomp32/rcomp16), so the per-pixel loads and the difference
 * loop (written as p[j] - p[j-1], without a carried variable) compile to vector code. */
static inline __attribute__((always_inline)) Py_ssize_t rcomp_impl(
    const uint8_t *src, Py_ssize_t nx, int blocksize, const Width *wd, uint8_t *dst) {
    const int bytepix = wd->bytepix;
    BitWriter w = {dst, 0, 0};
    uint32_t diff[MAX_BLOCKSIZE];
    uint32_t last = load_px(src, bytepix);
    put(&w, last, wd->bbits);
    for (Py_ssize_t i = 0; i < nx; i += blocksize) {
        int count = (nx - i < blocksize) ? (int)(nx - i) : blocksize;
        const uint8_t *p = src + bytepix * i;
        diff[0] = zigzag(load_px(p, bytepix) - last, bytepix);
        for (int j = 1; j < count; j++)
            diff[j] = zigzag(load_px(p + bytepix * j, bytepix) -
                             load_px(p + bytepix * (j - 1), bytepix), bytepix);
        last = load_px(p + bytepix * (count - 1), bytepix);
        uint64_t sum = 0;
        for (int j = 0; j < count; j++) sum += diff[j];
        /* CFITSIO's split heuristic, in exact integer arithmetic (its double is exact here). */
        int64_t num = (int64_t)sum - (count / 2) - 1;
        uint32_t psum = num > 0 ? (uint32_t)(num / count) >> 1 : 0;
        int fs = 0;
        while (psum > 0) {
            fs++;
            psum >>= 1;
        }
        if (fs >= wd->fsmax) {
            put(&w, (uint32_t)wd->fsmax + 1, wd->fsbits);
            for (int j = 0; j < count; j++) put(&w, diff[j], wd->bbits);
        } else if (fs == 0 && sum == 0) {
            put(&w, 0, wd->fsbits);
        } else {
            put(&w, (uint32_t)fs + 1, wd->fsbits);
            uint32_t mask = (1u << fs) - 1;
            for (int j = 0; j < count; j++) {
                uint32_t v = diff[j];
                uint32_t top = v >> fs;
                if (top + 1 + (uint32_t)fs <= 32) {
                    put(&w, ((uint32_t)1 << fs) | (v & mask), (int)(top + 1) + fs);
                } else {
                    while (top >= 32) {
                        put(&w, 0, 32);
                        top -= 32;
                    }
                    put(&w, 1, (int)top + 1);
                    if (fs > 0) put(&w, v & mask, fs);
                }
            }
        }
    }
    flush(&w);
    return (Py_ssize_t)(w.out - dst);
}

static Py_ssize_t rcomp32(const uint8_t *src, Py_ssize_t nx, int blocksize, uint8_t *dst) {
    return rcomp_impl(src, nx, blocksize, &W32, dst);
}

static Py_ssize_t rcomp16(const uint8_t *src, Py_ssize_t nx, int blocksize, uint8_t *dst) {
    return rcomp_impl(src, nx, blocksize, &W16, dst);
}

static Py_ssize_t rcomp(const uint8_t *src, Py_ssize_t nx, int blocksize, const Width *wd,
                        uint8_t *dst) {
    return wd->bytepix == 4 ? rcomp32(src, nx, blocksize, dst) : rcomp16(src, nx, blocksize, dst);
}

/* The C division above truncates toward zero like CFITSIO's double division followed by the
 * unsigned cast; `num <= 0` is its `dpsum < 0 -> 0` branch (for num == 0 both give 0). */

/* --- decoder -------------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p, *end;
    uint64_t buf;    /* the next `n` bits, most significant first; bits below them are zero */
    int n;           /* 0..64 */
    Py_ssize_t over; /* zero bytes supplied past the end of the stream */
} BitReader;

static inline void refill(BitReader *r) {
    while (r->n <= 56) {
        uint64_t byte = 0;
        if (r->p < r->end)
            byte = *r->p++;
        else
            r->over++;
        r->buf |= byte << (56 - r->n);
        r->n += 8;
    }
}

/* The next `nb` (1..32) bits. */
static inline uint32_t take(BitReader *r, int nb) {
    if (r->n < nb) refill(r);
    uint32_t v = (uint32_t)(r->buf >> (64 - nb));
    r->buf <<= nb;
    r->n -= nb;
    return v;
}

/* Decode one tile of `npix` pixels from `src[0:len]` into rows of `width` pixels at `dst`, rows
 * `stride` bytes apart. Returns NULL on success, else a static reason. */
static const char *rdecomp(const uint8_t *src, Py_ssize_t len, Py_ssize_t npix, int blocksize,
                           const Width *wd, uint8_t *dst, Py_ssize_t width, Py_ssize_t stride) {
    const int bytepix = wd->bytepix;
    const uint32_t pixmask = bytepix == 4 ? 0xFFFFFFFFu : 0xFFFFu;
    BitReader r = {src, src + len, 0, 0, 0};
    if (len < bytepix) return "is shorter than its first pixel";
    uint32_t last = take(&r, wd->bbits);
    Py_ssize_t col = 0;
    uint8_t *row = dst;
#define EMIT(value)                                                                            \
    do {                                                                                       \
        store_px(row + bytepix * col, (value), bytepix);                                       \
        if (++col == width) {                                                                  \
            col = 0;                                                                           \
            row += stride;                                                                     \
        }                                                                                      \
    } while (0)
    for (Py_ssize_t i = 0; i < npix;) {
        Py_ssize_t imax = i + blocksize < npix ? i + blocksize : npix;
        int code = (int)take(&r, wd->fsbits);
        int fs = code - 1;
        if (code == 0) {
            for (; i < imax; i++) EMIT(last);
        } else if (fs == wd->fsmax) {
            for (; i < imax; i++) {
                uint32_t v = take(&r, wd->bbits);
                uint32_t d = (v & 1) ? ~(v >> 1) : (v >> 1);
                last = (last + d) & pixmask;
                EMIT(last);
            }
        } else if (fs > wd->fsmax) {
            return "has an invalid split code";
        } else {
            for (; i < imax; i++) {
                uint32_t zeros = 0;
                for (;;) {
                    if (r.n == 0) refill(&r);
                    if (r.buf != 0) break;
                    zeros += (uint32_t)r.n;
                    r.n = 0;
                    if (r.over > 8) return "runs past the end of its data";
                }
                int lz = __builtin_clzll(r.buf); /* < r.n: bits below the valid ones are 0 */
                zeros += (uint32_t)lz;
                r.buf = lz + 1 >= 64 ? 0 : r.buf << (lz + 1);
                r.n -= lz + 1;
                uint32_t v = zeros << fs;
                if (fs > 0) v |= take(&r, fs);
                uint32_t d = (v & 1) ? ~(v >> 1) : (v >> 1);
                last = (last + d) & pixmask;
                EMIT(last);
            }
        }
        if (r.over > 8) return "runs past the end of its data";
    }
#undef EMIT
    /* bits consumed must lie within the tile's bytes (zero bytes past the end are not data) */
    if (8 * ((r.p - src) + r.over) - r.n > 8 * len) return "runs past the end of its data";
    return NULL;
}

/* --- Python API ----------------------------------------------------------------------------- */

static int check_blocksize(int blocksize) {
    if (blocksize < 1 || blocksize > MAX_BLOCKSIZE) {
        PyErr_Format(PyExc_ValueError, "blocksize must be 1..%d, not %d", MAX_BLOCKSIZE,
                     blocksize);
        return -1;
    }
    return 0;
}

static PyObject *code_tile(PyObject *args, const Width *wd) {
    Py_buffer view;
    int blocksize = 32;
    if (!PyArg_ParseTuple(args, "y*|i", &view, &blocksize)) return NULL;
    if (check_blocksize(blocksize) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (view.len == 0 || view.len % wd->bytepix) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError,
                     "expected a non-empty buffer of %d-byte pixels, got %zd bytes", wd->bytepix,
                     view.len);
        return NULL;
    }
    Py_ssize_t nx = view.len / wd->bytepix;
    PyObject *out = PyBytes_FromStringAndSize(NULL, bound(nx, blocksize, wd));
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t written;
    Py_BEGIN_ALLOW_THREADS
    written = rcomp((const uint8_t *)view.buf, nx, blocksize, wd,
                    (uint8_t *)PyBytes_AS_STRING(out));
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&out, written) < 0) return NULL;
    return out;
}

static PyObject *compress_be32(PyObject *self, PyObject *args) { return code_tile(args, &W32); }

static PyObject *compress_be16(PyObject *self, PyObject *args) { return code_tile(args, &W16); }

/* Shared argument checks of pack_image/unpack_image: an image of ncols x nrows pixels in tiles
 * of tcols x trows. Returns the number of tiles, or -1 with an exception set. */
static Py_ssize_t tile_grid(int bytepix, Py_ssize_t ncols, Py_ssize_t nrows, Py_ssize_t tcols,
                            Py_ssize_t trows, int blocksize) {
    if (width_of(bytepix) == NULL) {
        PyErr_Format(PyExc_ValueError, "bytepix must be 2 or 4, not %d", bytepix);
        return -1;
    }
    if (check_blocksize(blocksize) < 0) return -1;
    if (ncols < 1 || nrows < 1 || tcols < 1 || trows < 1 || tcols > ncols || trows > nrows) {
        PyErr_Format(PyExc_ValueError, "bad tiling: %zd x %zd tiles of a %zd x %zd image",
                     tcols, trows, ncols, nrows);
        return -1;
    }
    if (ncols > PY_SSIZE_T_MAX / nrows / bytepix) {
        PyErr_SetString(PyExc_ValueError, "image too large");
        return -1;
    }
    return ((ncols + tcols - 1) / tcols) * ((nrows + trows - 1) / trows);
}

/* pack_image(data, offset, bytepix, ncols, nrows, tile_cols, tile_rows, blocksize=32)
 *   -> (table, heap, max_tile_bytes) */
static PyObject *pack_image(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t offset, ncols, nrows, tcols, trows;
    int bytepix, blocksize = 32;
    if (!PyArg_ParseTuple(args, "y*ninnnn|i", &view, &offset, &bytepix, &ncols, &nrows, &tcols,
                          &trows, &blocksize))
        return NULL;
    PyObject *table = NULL, *heap = NULL;
    uint8_t *gather = NULL;
    Py_ssize_t ntiles = tile_grid(bytepix, ncols, nrows, tcols, trows, blocksize);
    if (ntiles < 0) goto fail;
    const Width *wd = width_of(bytepix);
    Py_ssize_t row_bytes = ncols * bytepix;
    if (offset < 0 || offset > view.len || nrows > (view.len - offset) / row_bytes) {
        PyErr_Format(PyExc_ValueError, "image of %zd bytes at %zd is outside a %zd-byte buffer",
                     row_bytes * nrows, offset, view.len);
        goto fail;
    }
    Py_ssize_t capacity = 0;
    for (Py_ssize_t r0 = 0; r0 < nrows; r0 += trows)
        for (Py_ssize_t c0 = 0; c0 < ncols; c0 += tcols) {
            Py_ssize_t h = nrows - r0 < trows ? nrows - r0 : trows;
            Py_ssize_t w = ncols - c0 < tcols ? ncols - c0 : tcols;
            capacity += bound(h * w, blocksize, wd);
        }
    table = PyBytes_FromStringAndSize(NULL, 8 * ntiles);
    heap = PyBytes_FromStringAndSize(NULL, capacity);
    if (table == NULL || heap == NULL) goto fail;
    if (tcols < ncols && (gather = malloc((size_t)(tcols * trows * bytepix))) == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    const uint8_t *image = (const uint8_t *)view.buf + offset;
    uint8_t *desc = (uint8_t *)PyBytes_AS_STRING(table);
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(heap);
    Py_ssize_t used = 0, longest = 0;
    int too_big = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r0 = 0; r0 < nrows && !too_big; r0 += trows) {
        Py_ssize_t h = nrows - r0 < trows ? nrows - r0 : trows;
        for (Py_ssize_t c0 = 0; c0 < ncols; c0 += tcols) {
            Py_ssize_t w = ncols - c0 < tcols ? ncols - c0 : tcols;
            const uint8_t *src = image + r0 * row_bytes + c0 * bytepix;
            if (w < ncols) { /* a tile narrower than the image: gather its rows first */
                for (Py_ssize_t y = 0; y < h; y++)
                    memcpy(gather + y * w * bytepix, src + y * row_bytes, (size_t)(w * bytepix));
                src = gather;
            }
            Py_ssize_t n = rcomp(src, h * w, blocksize, wd, out + used);
            if (used + n > INT32_MAX) { /* 1PB descriptors are 32-bit */
                too_big = 1;
                break;
            }
            store32(desc, (uint32_t)n);
            store32(desc + 4, (uint32_t)used);
            desc += 8;
            used += n;
            if (n > longest) longest = n;
        }
    }
    Py_END_ALLOW_THREADS
    if (too_big) {
        PyErr_SetString(PyExc_ValueError, "compressed heap exceeds 2 GiB (1PB descriptors)");
        goto fail;
    }
    free(gather);
    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&heap, used) < 0) {
        Py_DECREF(table);
        return NULL;
    }
    return Py_BuildValue("(NNn)", table, heap, longest);
fail:
    free(gather);
    Py_XDECREF(table);
    Py_XDECREF(heap);
    PyBuffer_Release(&view);
    return NULL;
}

/* unpack_image(data, table_offset, row_bytes, heap_offset, heap_size, bytepix, ncols, nrows,
 *              tile_cols, tile_rows, blocksize=32) -> big-endian image bytes */
static PyObject *unpack_image(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t table_offset, row_bytes, heap_offset, heap_size, ncols, nrows, tcols, trows;
    int bytepix, blocksize = 32;
    if (!PyArg_ParseTuple(args, "y*nnnninnnn|i", &view, &table_offset, &row_bytes, &heap_offset,
                          &heap_size, &bytepix, &ncols, &nrows, &tcols, &trows, &blocksize))
        return NULL;
    PyObject *image = NULL;
    Py_ssize_t ntiles = tile_grid(bytepix, ncols, nrows, tcols, trows, blocksize);
    if (ntiles < 0) goto fail;
    if (row_bytes < 8 || table_offset < 0 || heap_offset < 0 || heap_size < 0 ||
        table_offset > view.len || ntiles > (view.len - table_offset) / row_bytes ||
        heap_offset > view.len || heap_size > view.len - heap_offset) {
        PyErr_SetString(PyExc_ValueError, "tile table or heap lies outside the data");
        goto fail;
    }
    const Width *wd = width_of(bytepix);
    Py_ssize_t out_row = ncols * bytepix;
    image = PyBytes_FromStringAndSize(NULL, out_row * nrows);
    if (image == NULL) goto fail;
    const uint8_t *base = (const uint8_t *)view.buf;
    uint8_t *dst = (uint8_t *)PyBytes_AS_STRING(image);
    const char *error = NULL;
    Py_ssize_t bad_tile = 0;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t t = 0;
    for (Py_ssize_t r0 = 0; r0 < nrows && !error; r0 += trows) {
        Py_ssize_t h = nrows - r0 < trows ? nrows - r0 : trows;
        for (Py_ssize_t c0 = 0; c0 < ncols; c0 += tcols, t++) {
            Py_ssize_t w = ncols - c0 < tcols ? ncols - c0 : tcols;
            const uint8_t *desc = base + table_offset + t * row_bytes;
            int64_t len = (int32_t)load32(desc), at = (int32_t)load32(desc + 4);
            if (len <= 0 || at < 0 || at + len > heap_size) {
                error = "has a descriptor outside the heap";
            } else {
                error = rdecomp(base + heap_offset + at, (Py_ssize_t)len, h * w, blocksize, wd,
                                dst + r0 * out_row + c0 * bytepix, w, out_row);
            }
            if (error) {
                bad_tile = t;
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (error) {
        PyErr_Format(PyExc_ValueError, "tile %zd %s", bad_tile, error);
        goto fail;
    }
    PyBuffer_Release(&view);
    return image;
fail:
    Py_XDECREF(image);
    PyBuffer_Release(&view);
    return NULL;
}

/* checksum(data, start=0) -> ones' complement sum of big-endian 32-bit words (FITS CHECKSUM
 * convention; a short last word is zero-padded), folded to 32 bits. */
static PyObject *checksum(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long long start = 0;
    if (!PyArg_ParseTuple(args, "y*|K", &view, &start)) return NULL;
    const uint8_t *p = (const uint8_t *)view.buf;
    Py_ssize_t words = view.len / 4, rest = view.len % 4;
    uint64_t sum = start;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < words; i++) {
        sum += load32(p + 4 * i);
        if (sum >> 62) sum = (sum & 0xFFFFFFFFu) + (sum >> 32); /* never overflows */
    }
    if (rest) {
        uint8_t last[4] = {0, 0, 0, 0};
        memcpy(last, p + 4 * words, (size_t)rest);
        sum += load32(last);
    }
    while (sum >> 32) sum = (sum & 0xFFFFFFFFu) + (sum >> 32);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLongLong(sum);
}

/* same_bytes(a, b) -> bool: byte-for-byte equality of two buffers (a memcmp without the GIL;
 * Python's own memoryview comparison goes item by item). */
static PyObject *same_bytes(PyObject *self, PyObject *args) {
    Py_buffer a, b;
    if (!PyArg_ParseTuple(args, "y*y*", &a, &b)) return NULL;
    int same = a.len == b.len;
    if (same) {
        Py_BEGIN_ALLOW_THREADS
        same = memcmp(a.buf, b.buf, (size_t)a.len) == 0;
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return PyBool_FromLong(same);
}

static PyMethodDef methods[] = {
    {"compress_be32", compress_be32, METH_VARARGS,
     "compress_be32(pixels, blocksize=32) -> bytes\n\n"
     "RICE_1-code big-endian int32 pixels (a FITS data unit slice) as one tile."},
    {"compress_be16", compress_be16, METH_VARARGS,
     "compress_be16(pixels, blocksize=32) -> bytes\n\n"
     "RICE_1-code big-endian int16 pixels (a FITS data unit slice) as one tile."},
    {"pack_image", pack_image, METH_VARARGS,
     "pack_image(data, offset, bytepix, ncols, nrows, tile_cols, tile_rows, blocksize=32)\n"
     "    -> (table, heap, max_tile_bytes)\n\n"
     "RICE_1-code the big-endian image at data[offset:] tile by tile (tiles in FITS order, first\n"
     "axis fastest): the 1PB descriptor table (length, heap offset per tile) and the heap."},
    {"unpack_image", unpack_image, METH_VARARGS,
     "unpack_image(data, table_offset, row_bytes, heap_offset, heap_size, bytepix, ncols,\n"
     "             nrows, tile_cols, tile_rows, blocksize=32) -> bytes\n\n"
     "Decode every RICE_1 tile of a compressed image HDU into its big-endian data unit;\n"
     "ValueError naming the tile if the stream is corrupt."},
    {"checksum", checksum, METH_VARARGS,
     "checksum(data, start=0) -> int\n\n"
     "Ones' complement sum of big-endian 32-bit words, the FITS CHECKSUM/DATASUM sum."},
    {"same_bytes", same_bytes, METH_VARARGS,
     "same_bytes(a, b) -> bool\n\nWhether two buffers hold the same bytes (memcmp)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rice", "RICE_1 coder/decoder and FITS checksum (see _rice.c).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__rice(void) { return PyModule_Create(&module); }
