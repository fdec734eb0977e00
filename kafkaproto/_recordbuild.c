/*
 * Compiled record encoding for kafkaproto.records.build_batch: the records section of a
 * v2 batch in one pass over the (key, value, headers, timestamp_ms) tuples, with no
 * Python object built per record. The MQTT bridge encodes one record per message, each
 * with headers; in Python that was most of its producer's time.
 *
 * encode(records, base_timestamp) -> (payload, max_timestamp)
 *
 * Accepts exactly bytes/None keys and values, str header keys and bytes/None header
 * values; anything else raises TypeError and the caller takes the pure-Python path
 * (kafkaproto/records.py), which must produce the same bytes (tests compare them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static inline Py_ssize_t
varint_size(int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *
put_varint(uint8_t *p, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z >= 0x80) {
        *p++ = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    *p++ = (uint8_t)z;
    return p;
}

/* The parts of one record, borrowed from its tuple. */
typedef struct {
    PyObject *key, *value, *headers; /* headers: a PySequence_Fast result (new reference) */
    int64_t ts;
    Py_ssize_t body;
} Parts;

static int
type_error(Py_ssize_t index, const char *what)
{
    PyErr_Format(PyExc_TypeError, "record %zd: %s", index, what);
    return -1;
}

/* Body size (without its own length prefix) of record i; fills *parts. */
static int
measure(PyObject *record, Py_ssize_t i, int64_t base_ts, Parts *parts)
{
    Py_ssize_t size, n, j;
    if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != 4)
        return type_error(i, "not a (key, value, headers, timestamp) tuple");
    parts->key = PyTuple_GET_ITEM(record, 0);
    parts->value = PyTuple_GET_ITEM(record, 1);
    parts->ts = PyLong_AsLongLong(PyTuple_GET_ITEM(record, 3));
    if (parts->ts == -1 && PyErr_Occurred())
        return -1;
    size = 1 + varint_size(parts->ts - base_ts) + varint_size(i);
    if (parts->key == Py_None)
        size += 1;
    else if (PyBytes_CheckExact(parts->key))
        size += varint_size(PyBytes_GET_SIZE(parts->key)) + PyBytes_GET_SIZE(parts->key);
    else
        return type_error(i, "key not bytes");
    if (parts->value == Py_None)
        size += 1;
    else if (PyBytes_CheckExact(parts->value))
        size += varint_size(PyBytes_GET_SIZE(parts->value)) + PyBytes_GET_SIZE(parts->value);
    else
        return type_error(i, "value not bytes");
    parts->headers = PySequence_Fast(PyTuple_GET_ITEM(record, 2), "headers not a sequence");
    if (parts->headers == NULL)
        return -1;
    n = PySequence_Fast_GET_SIZE(parts->headers);
    size += varint_size(n);
    for (j = 0; j < n; j++) {
        PyObject *h = PySequence_Fast_GET_ITEM(parts->headers, j), *hk, *hv;
        Py_ssize_t klen;
        if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) != 2)
            return type_error(i, "header not a (key, value) tuple");
        hk = PyTuple_GET_ITEM(h, 0);
        hv = PyTuple_GET_ITEM(h, 1);
        if (!PyUnicode_CheckExact(hk) || PyUnicode_AsUTF8AndSize(hk, &klen) == NULL)
            return type_error(i, "header key not str");
        size += varint_size(klen) + klen;
        if (hv == Py_None)
            size += 1;
        else if (PyBytes_CheckExact(hv))
            size += varint_size(PyBytes_GET_SIZE(hv)) + PyBytes_GET_SIZE(hv);
        else
            return type_error(i, "header value not bytes");
    }
    parts->body = size;
    return 0;
}

static uint8_t *
put_bytes(uint8_t *p, PyObject *b)
{
    if (b == Py_None)
        return put_varint(p, -1);
    p = put_varint(p, PyBytes_GET_SIZE(b));
    memcpy(p, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
    return p + PyBytes_GET_SIZE(b);
}

static uint8_t *
write_record(uint8_t *p, const Parts *parts, Py_ssize_t i, int64_t base_ts)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(parts->headers), j;
    p = put_varint(p, parts->body);
    *p++ = 0; /* attributes */
    p = put_varint(p, parts->ts - base_ts);
    p = put_varint(p, i);
    p = put_bytes(p, parts->key);
    p = put_bytes(p, parts->value);
    p = put_varint(p, n);
    for (j = 0; j < n; j++) {
        PyObject *h = PySequence_Fast_GET_ITEM(parts->headers, j);
        Py_ssize_t klen;
        const char *k = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(h, 0), &klen);
        p = put_varint(p, klen);
        memcpy(p, k, (size_t)klen);
        p += klen;
        p = put_bytes(p, PyTuple_GET_ITEM(h, 1));
    }
    return p;
}

static PyObject *
encode(PyObject *self, PyObject *args)
{
    PyObject *records, *seq, *out = NULL;
    long long base_ts;
    Py_ssize_t n, i, total = 0;
    int64_t max_ts;
    Parts *parts;
    uint8_t *p;
    (void)self;
    if (!PyArg_ParseTuple(args, "OL:encode", &records, &base_ts))
        return NULL;
    seq = PySequence_Fast(records, "records not a sequence");
    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    parts = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Parts));
    if (parts == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    max_ts = base_ts;
    for (i = 0; i < n; i++) {
        if (measure(PySequence_Fast_GET_ITEM(seq, i), i, base_ts, &parts[i]) != 0)
            goto done;
        if (parts[i].ts > max_ts)
            max_ts = parts[i].ts;
        total += varint_size(parts[i].body) + parts[i].body;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        goto done;
    p = (uint8_t *)PyBytes_AS_STRING(out);
    for (i = 0; i < n; i++)
        p = write_record(p, &parts[i], i, base_ts);
done:
    for (i = 0; i < n; i++)
        Py_XDECREF(parts[i].headers);
    PyMem_Free(parts);
    Py_DECREF(seq);
    if (out == NULL)
        return NULL;
    return Py_BuildValue("(NL)", out, (long long)max_ts);
}

static PyMethodDef methods[] = {
    {"encode", encode, METH_VARARGS,
     "encode(records, base_timestamp) -> (payload, max_timestamp)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kafkaproto._recordbuild",
    "Compiled v2 record encoding; see kafkaproto.records.build_batch.", -1, methods,
};

PyMODINIT_FUNC
PyInit__recordbuild(void)
{
    return PyModule_Create(&module);
}
