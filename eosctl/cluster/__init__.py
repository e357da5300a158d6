"""What Kafka holds, read over the wire: raw requests and their answers, record batches and keys, a
partition's log scanned and classified into the shared model, groups' committed offsets, and the client
factories."""
