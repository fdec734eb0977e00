/*
 * Compiled record walk for kafkaproto.validate: checks the framing of every record in a
 * v2 batch's (decompressed) payload without building any Python object per record.
 *
 * walk(data, count, reject_null_keys) -> (code, index, pos, detail, max_timestamp_delta)
 *
 * The codes and their meaning are defined once, in kafkaproto/validate.py, which also
 * holds the pure-Python walk this must agree with byte for byte (tests compare them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum {
    OK = 0,
    END_OF_RECORDS = 1,
    BAD_VARINT = 2,
    RECORD_LENGTH = 3,
    OFFSET_DELTA = 4,
    KEY_LENGTH = 5,
    VALUE_LENGTH = 6,
    HEADER_COUNT = 7,
    HEADER_KEY_NULL = 8,
    HEADER_KEY_LENGTH = 9,
    HEADER_VALUE_LENGTH = 10,
    HEADER_KEY_UTF8 = 11,
    RECORD_SIZE_MISMATCH = 12,
    TRAILING_BYTES = 13,
    NULL_KEY = 14,
};

enum {
    F_LENGTH = 0,
    F_TIMESTAMP_DELTA = 1,
    F_OFFSET_DELTA = 2,
    F_KEY_LENGTH = 3,
    F_VALUE_LENGTH = 4,
    F_HEADER_COUNT = 5,
    F_HEADER_KEY_LENGTH = 6,
    F_HEADER_VALUE_LENGTH = 7,
};

#define MIN_RECORD_SIZE 6

/* Zig-zag varint of at most max_bytes bytes ending before end; 0 on success. */
static inline int
read_zigzag(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int max_bytes, int64_t *out)
{
    Py_ssize_t p = *pos;
    uint64_t raw = 0;
    int i;
    /* Lengths and deltas in real batches take one or two bytes: no loop for those. */
    if (end - p >= 2) {
        uint8_t b0 = buf[p], b1 = buf[p + 1];
        if (b0 < 0x80) {
            *out = (int64_t)(b0 >> 1) ^ -(int64_t)(b0 & 1);
            *pos = p + 1;
            return 0;
        }
        if (b1 < 0x80) {
            raw = (uint64_t)(b0 & 0x7F) | ((uint64_t)b1 << 7);
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            *pos = p + 2;
            return 0;
        }
        raw = 0;
    }
    for (i = 0; i < max_bytes; i++) {
        uint8_t b;
        if (p >= end)
            return -1;
        b = buf[p++];
        if (i == 9 && b > 1)
            return -1; /* more than 64 bits */
        raw |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            if (max_bytes == 5 && raw > 0xFFFFFFFFULL)
                return -1; /* outside int32 */
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            *pos = p;
            return 0;
        }
    }
    return -1;
}

static PyObject *
result(int code, Py_ssize_t index, Py_ssize_t pos, int64_t detail, int64_t max_delta)
{
    return Py_BuildValue("(innLL)", code, index, pos, (long long)detail, (long long)max_delta);
}

#define VARINT(field, nbytes, target)                                               \
    if (read_zigzag(buf, &p, record_end, (nbytes), &(target)) != 0)                 \
        return result(BAD_VARINT, i, p, (field), max_delta);

static PyObject *
walk_buffer(const uint8_t *buf, Py_ssize_t n, Py_ssize_t count, int reject_null_keys)
{
    Py_ssize_t p = 0, i;
    int64_t max_delta = INT64_MIN;
    for (i = 0; i < count; i++) {
        int64_t length, ts_delta, offset_delta, size, header_count, h;
        Py_ssize_t record_end = n, start;
        if (p >= n)
            return result(END_OF_RECORDS, i, p, 0, max_delta);
        VARINT(F_LENGTH, 5, length);
        if (length < MIN_RECORD_SIZE || length > n - p)
            return result(RECORD_LENGTH, i, p, length, max_delta);
        record_end = p + (Py_ssize_t)length;
        p += 1; /* attributes: unused in magic 2 */
        VARINT(F_TIMESTAMP_DELTA, 10, ts_delta);
        if (ts_delta > max_delta)
            max_delta = ts_delta;
        VARINT(F_OFFSET_DELTA, 5, offset_delta);
        if (offset_delta != i)
            return result(OFFSET_DELTA, i, p, offset_delta, max_delta);
        start = p;
        VARINT(F_KEY_LENGTH, 5, size);
        if (size == -1) {
            if (reject_null_keys)
                return result(NULL_KEY, i, start, size, max_delta);
        } else if (size < 0 || size > record_end - p) {
            return result(KEY_LENGTH, i, start, size, max_delta);
        } else {
            p += (Py_ssize_t)size;
        }
        start = p;
        VARINT(F_VALUE_LENGTH, 5, size);
        if (size != -1) {
            if (size < 0 || size > record_end - p)
                return result(VALUE_LENGTH, i, start, size, max_delta);
            p += (Py_ssize_t)size;
        }
        start = p;
        VARINT(F_HEADER_COUNT, 5, header_count);
        if (header_count < 0 || header_count > (record_end - p) / 2)
            return result(HEADER_COUNT, i, start, header_count, max_delta);
        for (h = 0; h < header_count; h++) {
            start = p;
            VARINT(F_HEADER_KEY_LENGTH, 5, size);
            if (size == -1)
                return result(HEADER_KEY_NULL, i, start, size, max_delta);
            if (size < 0 || size > record_end - p)
                return result(HEADER_KEY_LENGTH, i, start, size, max_delta);
            if (size > 0) {
                PyObject *key = PyUnicode_DecodeUTF8((const char *)buf + p, (Py_ssize_t)size, NULL);
                if (key == NULL) {
                    PyErr_Clear();
                    return result(HEADER_KEY_UTF8, i, p, size, max_delta);
                }
                Py_DECREF(key);
            }
            p += (Py_ssize_t)size;
            start = p;
            VARINT(F_HEADER_VALUE_LENGTH, 5, size);
            if (size != -1) {
                if (size < 0 || size > record_end - p)
                    return result(HEADER_VALUE_LENGTH, i, start, size, max_delta);
                p += (Py_ssize_t)size;
            }
        }
        if (p != record_end)
            return result(RECORD_SIZE_MISMATCH, i, p, length, max_delta);
    }
    if (p != n)
        return result(TRAILING_BYTES, count, p, n - p, max_delta);
    return result(OK, count, p, 0, max_delta);
}

static PyObject *
walk(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    int reject_null_keys;
    PyObject *out;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*np:walk", &view, &count, &reject_null_keys))
        return NULL;
    if (count < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "count must be >= 0");
        return NULL;
    }
    out = walk_buffer((const uint8_t *)view.buf, view.len, count, reject_null_keys);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(data, count, reject_null_keys) -> (code, index, pos, detail, max_timestamp_delta)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kafkaproto._recordwalk",
    "Compiled record-framing walk; see kafkaproto.validate.", -1, methods,
};

PyMODINIT_FUNC
PyInit__recordwalk(void)
{
    return PyModule_Create(&module);
}
