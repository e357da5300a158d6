/* The records of Kafka v2 batches walked record by record, and byte ranges hashed: the native half of
 * eosctl/cluster/recordkeys.py (built by `make setup` into _recordwalk.so; without it recordkeys.py does the
 * same in numpy, lock step over batches, ~10x slower: docs/benchmarks.md).
 *
 * Record layout (Kafka's DefaultRecord): length varint, attributes int8, timestampDelta varlong,
 * offsetDelta varint, keyLength varint (-1: null), key, valueLength varint, value, headers.
 * Varints are zigzag encoded (org.apache.kafka.common.utils.ByteUtils.readVarint / readVarlong).
 */
#include <stdint.h>
#include <string.h>

#define CORRUPT_FIELDS -1  /* a record's fields run past the record or the buffer */
#define CORRUPT_VALUE -2   /* a record's value runs past the record */
#define CORRUPT_VARINT -3  /* a varint longer than 5 bytes */
#define CORRUPT_VARLONG -4 /* a varlong longer than 10 bytes */

static int varint(const uint8_t *buf, int64_t end, int64_t *pos, int64_t *out, int max_bytes) {
    uint64_t v = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (*pos >= end) return CORRUPT_FIELDS;
        uint8_t b = buf[(*pos)++];
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            return 0;
        }
    }
    return max_bytes == 5 ? CORRUPT_VARINT : CORRUPT_VARLONG;
}

/* For each batch b (its records at starts[b], counts[b] of them, in the order given), each record's
 * offsetDelta, key position and key length (-1: null), at index firsts[b] + k for its k-th record; where
 * ts_delta is not NULL its timestampDelta too, and with values != 0 its value position and length. limit:
 * the end of the records' bytes (the buffer may be longer: padding). 0, or a CORRUPT_ code. */
static int walk(const uint8_t *buf, int64_t limit, const int64_t *starts, const int64_t *counts,
                const int64_t *firsts, int64_t batches, int values, int64_t *delta, int64_t *ts_delta,
                int64_t *key_at, int64_t *key_len, int64_t *value_at, int64_t *value_len) {
    for (int64_t b = 0; b < batches; b++) {
        int64_t p = starts[b];
        for (int64_t k = 0; k < counts[b]; k++) {
            int64_t length, ts, d, klen, rc;
            if ((rc = varint(buf, limit, &p, &length, 5))) return (int)rc;
            int64_t next = p + length;
            if (length < 0 || next > limit) return CORRUPT_FIELDS;
            int64_t q = p + 1; /* past attributes */
            if ((rc = varint(buf, next, &q, &ts, 10))) return (int)rc;
            if ((rc = varint(buf, next, &q, &d, 5))) return (int)rc;
            if ((rc = varint(buf, next, &q, &klen, 5))) return (int)rc;
            if (q + (klen > 0 ? klen : 0) > next) return CORRUPT_FIELDS;
            int64_t at = firsts[b] + k;
            delta[at] = d;
            if (ts_delta) ts_delta[at] = ts;
            key_at[at] = q;
            key_len[at] = klen;
            if (values) {
                int64_t v = q + (klen > 0 ? klen : 0), vlen;
                if ((rc = varint(buf, next, &v, &vlen, 5))) return rc == CORRUPT_FIELDS ? CORRUPT_VALUE : (int)rc;
                if (v + (vlen > 0 ? vlen : 0) > next) return CORRUPT_VALUE;
                value_at[at] = v;
                value_len[at] = vlen;
            }
            p = next;
        }
    }
    return 0;
}

/* The walk without timestamps: what the content check (recordkeys.py) reads of each record. */
int walk_records(const uint8_t *buf, int64_t limit, const int64_t *starts, const int64_t *counts,
                 const int64_t *firsts, int64_t batches, int values, int64_t *delta, int64_t *key_at,
                 int64_t *key_len, int64_t *value_at, int64_t *value_len) {
    return walk(buf, limit, starts, counts, firsts, batches, values, delta, NULL, key_at, key_len, value_at,
                value_len);
}

static const uint64_t M1 = 0xFF51AFD7ED558CCDULL, M2 = 0xC4CEB9FE1A85EC53ULL;
static const uint64_t NULL_HASH = 0x9E3779B97F4A7C15ULL;

static inline uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= M1;
    h ^= h >> 33;
    h *= M2;
    return h ^ (h >> 33);
}

/* recordkeys.key_hashes, bit for bit: each range's length seeds the hash, its bytes are mixed in 8 at a
 * time (little-endian words, the last masked to the range's length), then a final mix; -1: null. The
 * buffer needs 8 readable bytes past its last range. */
void hash_ranges(const uint8_t *buf, const int64_t *at, const int64_t *lengths, int64_t n, uint64_t *out) {
    for (int64_t i = 0; i < n; i++) {
        int64_t len = lengths[i];
        uint64_t h = (uint64_t)len * M1 + 1;
        for (int64_t j = 0; j < len; j += 8) {
            uint64_t w;
            memcpy(&w, buf + at[i] + j, 8);
            int64_t rem = len - j;
            if (rem < 8) w &= (((uint64_t)1) << (rem * 8)) - 1;
            h = mix(h ^ w);
        }
        out[i] = len < 0 ? NULL_HASH : mix(h);
    }
}

/* The walk with every record's timestampDelta too (ts_delta[at]) and always the values: what a state
 * sink's audit (auditors/statebytes.py) reads of each record, its key and value bytes left in the buffer. */
int walk_records_ts(const uint8_t *buf, int64_t limit, const int64_t *starts, const int64_t *counts,
                    const int64_t *firsts, int64_t batches, int64_t *delta, int64_t *ts_delta, int64_t *key_at,
                    int64_t *key_len, int64_t *value_at, int64_t *value_len) {
    return walk(buf, limit, starts, counts, firsts, batches, 1, delta, ts_delta, key_at, key_len, value_at,
                value_len);
}

/* The byte ranges (length < 0: null, nothing copied) one after the other into out, which has room for the
 * sum of the non-negative lengths: auditors/statebytes.py's key and value columns, one memcpy a record
 * where numpy's gather built an index of eight bytes a byte. */
void copy_ranges(const uint8_t *buf, const int64_t *at, const int64_t *lengths, int64_t n, uint8_t *out) {
    for (int64_t i = 0; i < n; i++) {
        int64_t len = lengths[i];
        if (len > 0) {
            memcpy(out, buf + at[i], (size_t)len);
            out += len;
        }
    }
}
