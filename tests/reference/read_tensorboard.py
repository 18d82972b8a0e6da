#!/usr/bin/env python3
"""Reads the TensorBoard event files of a folder with readers mixprec did not write and prints
every scalar as JSON lines {"reader", "tag", "step", "value"}, for
tests/reference/tensorboard_test.cpp:

* "tensorboard": TensorBoard's own EventAccumulator, where the tensorboard package imports;
* "protobuf": Google's protobuf runtime (Debian's python3-protobuf) parsing each record as
  TensorFlow's Event message, built from a descriptor with TensorFlow's field numbers, after
  checking each record's length and data CRC-32C (a bitwise CRC here, beside the C++ table).

    read_tensorboard.py FOLDER
"""
import glob
import json
import os
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def event_class():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="tb_event.proto", package="tb", syntax="proto3")
    value = fdp.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
    summary = fdp.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, type_name=".tb.Value",
                      label=F.LABEL_REPEATED)
    event = fdp.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, type_name=".tb.Summary",
                    label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    desc = pool.FindMessageTypeByName("tb.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def read_protobuf(folder):
    Event = event_class()
    for path in sorted(glob.glob(os.path.join(folder, "*tfevents*"))):
        data = open(path, "rb").read()
        at, first = 0, True
        while at < len(data):
            header = data[at:at + 8]
            (length,) = struct.unpack("<Q", header)
            (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
            assert length_crc == masked(header), f"{path}: bad length CRC at byte {at}"
            body = data[at + 12:at + 12 + length]
            (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
            assert body_crc == masked(body), f"{path}: bad data CRC at byte {at}"
            at += 16 + length
            e = Event()
            e.ParseFromString(body)
            if first:
                assert e.file_version == "brain.Event:2", e
                first = False
            for v in e.summary.value:
                print(json.dumps({"reader": "protobuf", "tag": v.tag, "step": e.step,
                                  "value": v.simple_value}))


def read_tensorboard(folder):
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        return
    acc = EventAccumulator(folder, size_guidance={"scalars": 0})
    acc.Reload()
    for tag in acc.Tags()["scalars"]:
        for s in acc.Scalars(tag):
            print(json.dumps({"reader": "tensorboard", "tag": tag, "step": s.step,
                              "value": s.value}))


if __name__ == "__main__":
    read_protobuf(sys.argv[1])
    read_tensorboard(sys.argv[1])
