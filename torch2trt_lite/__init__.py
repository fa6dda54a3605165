"""torch2trt-lite: convert a PyTorch model to a TensorRT engine during one forward pass."""
