#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How big would dlflame's timeline be in Perfetto's own protobuf format?

  bench/perfetto_size.py TRACE.json [OUT.pftrace]

Reads a `dlflame report --trace` file and writes the same spans as Perfetto
TracePackets (perfetto/protos/perfetto/trace/trace_packet.proto): one
TrackDescriptor per thread, a packet sequence per thread whose defaults name
its track, TrackEvent SLICE_BEGIN/SLICE_END packets with absolute timestamps
(ns) and event names interned per sequence (InternedData.event_names). That
is the usual compact encoding a writer would choose; delta-encoded
timestamps (an incremental clock) would shave a few bytes more per event.
Prints the sizes of both, plain and gzip'ed.
"""
import gzip
import json
import sys


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(num, v):
    return varint(num << 3) + varint(v)


def field_bytes(num, data):
    return varint(num << 3 | 2) + varint(len(data)) + data


# field numbers, from perfetto's protos
TRACE_PACKET = 1  # Trace.packet
TP_TIMESTAMP, TP_SEQ_ID, TP_TRACK_EVENT, TP_INTERNED, TP_SEQ_FLAGS = 8, 10, 11, 12, 13
TP_DEFAULTS, TP_TRACK_DESCRIPTOR = 59, 60
TPD_TRACK_EVENT_DEFAULTS, TED_TRACK_UUID = 11, 11
TE_TYPE, TE_NAME_IID = 9, 10
SLICE_BEGIN, SLICE_END = 1, 2
ID_EVENT_NAMES, EN_IID, EN_NAME = 2, 1, 2
TD_UUID, TD_NAME, TD_THREAD = 1, 2, 4
THD_PID, THD_TID, THD_NAME = 1, 2, 5
INCREMENTAL_STATE_CLEARED, NEEDS_INCREMENTAL_STATE = 1, 2


def packet(body):
    return field_bytes(TRACE_PACKET, body)


def encode(doc):
    names = {}
    spans = {}
    for e in doc['traceEvents']:
        if e['ph'] == 'M' and e['name'] == 'thread_name':
            names[(e['pid'], e['tid'])] = e['args']['name']
        elif e['ph'] == 'X':
            start = round(e['ts'] * 1000)
            spans.setdefault((e['pid'], e['tid']), []).append(
                (start, start + round(e['dur'] * 1000), e['name']))
    out = bytearray()
    for seq, (track, ss) in enumerate(sorted(spans.items()), start=1):
        uuid = seq
        thread = (field_varint(THD_PID, track[0]) + field_varint(THD_TID, track[1]) +
                  field_bytes(THD_NAME, names.get(track, '').encode()))
        out += packet(field_bytes(TP_TRACK_DESCRIPTOR,
                                  field_varint(TD_UUID, uuid) + field_bytes(TD_THREAD, thread)))
        defaults = field_bytes(TPD_TRACK_EVENT_DEFAULTS, field_varint(TED_TRACK_UUID, uuid))
        out += packet(field_varint(TP_SEQ_ID, seq) +
                      field_varint(TP_SEQ_FLAGS, INCREMENTAL_STATE_CLEARED) +
                      field_bytes(TP_DEFAULTS, defaults))
        iids = {}

        def event(ts, kind, name=None):
            body = field_varint(TP_TIMESTAMP, ts) + field_varint(TP_SEQ_ID, seq)
            ev = field_varint(TE_TYPE, kind)
            if name is not None:
                if name not in iids:
                    iids[name] = len(iids) + 1
                    body += field_bytes(TP_INTERNED, field_bytes(
                        ID_EVENT_NAMES, field_varint(EN_IID, iids[name]) +
                        field_bytes(EN_NAME, name.encode())))
                ev += field_varint(TE_NAME_IID, iids[name])
            body += field_varint(TP_SEQ_FLAGS, NEEDS_INCREMENTAL_STATE)
            body += field_bytes(TP_TRACK_EVENT, ev)
            return packet(body)

        # the file lists a thread's spans by start, parents first: a stack closes them
        stack = []
        for start, end, name in ss:
            while stack and stack[-1] <= start:
                out += event(stack.pop(), SLICE_END)
            out += event(start, SLICE_BEGIN, name)
            stack.append(end)
        while stack:
            out += event(stack.pop(), SLICE_END)
    return bytes(out), sum(len(s) for s in spans.values())


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    with open(sys.argv[1], 'rb') as f:
        raw = f.read()
    proto, nspans = encode(json.loads(raw))
    if len(sys.argv) == 3:
        with open(sys.argv[2], 'wb') as f:
            f.write(proto)
    mb = 1e6
    print('spans: %d' % nspans)
    print('JSON:     %8.1f MB (%.0f bytes a span), gzip %6.1f MB' %
          (len(raw) / mb, len(raw) / max(1, nspans), len(gzip.compress(raw, 6)) / mb))
    print('protobuf: %8.1f MB (%.0f bytes a span), gzip %6.1f MB' %
          (len(proto) / mb, len(proto) / max(1, nspans), len(gzip.compress(proto, 6)) / mb))


if __name__ == '__main__':
    main()
