"""Generated protobuf and gRPC code for tributary.v1. DO NOT EDIT.

Produced by sdk/python/generate.sh from proto/tributary/v1/tributary.proto;
the public API of the SDK is the package tributary, not this one.
"""
