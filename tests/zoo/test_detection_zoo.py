"""Detectors end to end in one engine (issue 15): torchvision's one-stage detectors with their
pre-processing (normalize, resize, batch_images) and post-processing (score thresholds, top-k of a
data-dependent count, box decoding, batched NMS, ``[:detections_per_img]``), and a YOLO-style
post-processing, converted on the sim and compared with eager PyTorch on the traced image and on a
second image.

Random weights with the score heads scaled so that scores are mid-range: some boxes pass each
threshold and some do not, and the counts differ between the two images (asserted), so the engine's
data-dependent sizes are exercised. Detections come out sorted by score (batched_nms): ties are not
expected with random weights, so the comparison is in order.

The two-stage detectors (fasterrcnn, maskrcnn, keypointrcnn) convert too: ``BoxCoder.decode``'s
``if box_sum > 0`` on the data-dependent proposal count is answered by a guard rule, and the Python
loops over the detections (maskrcnn's mask pasting, keypointrcnn's ``heatmaps_to_keypoints``: a
bicubic resize of each detection's heatmaps to its box and their argmax) by vectorized converters
(converters/zoo_torchvision.py).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch2trt_lite

torchvision = pytest.importorskip("torchvision")
detection = torchvision.models.detection


class _Wrap(nn.Module):
    """One image in, its detections dict out (torchvision detectors take a list of images)."""

    def __init__(self, m: nn.Module) -> None:
        super().__init__()
        self.m = m

    def forward(self, image: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.m([image])[0]  # type: ignore[no-any-return]


def _sigmoid_head(m: nn.Module, scale: float) -> None:
    # RetinaNet/FCOS: the classification prior (bias -4.6, sigmoid 0.01) moved to 0 and the weights
    # scaled, so sigmoid scores spread around 0.5
    with torch.no_grad():
        m.head.classification_head.cls_logits.bias.zero_()
        m.head.classification_head.cls_logits.weight.mul_(scale)


def _ssd() -> nn.Module:
    torch.manual_seed(0)
    m = detection.ssd300_vgg16(weights=None, weights_backbone=None, num_classes=6, score_thresh=0.2,
                               topk_candidates=40, detections_per_img=1000)
    with torch.no_grad():
        for conv in m.head.classification_head.module_list:
            conv.weight.mul_(20.0)
    return m


def _retinanet() -> nn.Module:
    torch.manual_seed(0)
    m = detection.retinanet_resnet50_fpn(weights=None, weights_backbone=None, num_classes=5, min_size=256,
                                         max_size=256, score_thresh=0.5, topk_candidates=40, detections_per_img=1000)
    _sigmoid_head(m, 30.0)
    return m


def _fcos() -> nn.Module:
    torch.manual_seed(0)
    m = detection.fcos_resnet50_fpn(weights=None, weights_backbone=None, num_classes=5, min_size=256, max_size=256,
                                    score_thresh=0.3, topk_candidates=40, detections_per_img=1000)
    _sigmoid_head(m, 30.0)
    return m


def _fasterrcnn() -> nn.Module:
    torch.manual_seed(0)
    m = detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=5,
                                                        box_score_thresh=0.4, box_detections_per_img=1000)
    with torch.no_grad():
        # random weights shrink the mobilenet features to ~1e-8, so every RoI scores the same (ties);
        # scaled so the RoI head sees varied features and softmax scores spread over [0, 1]
        m.roi_heads.box_head.fc6.weight.mul_(1e7)
        m.roi_heads.box_predictor.cls_score.weight.mul_(100.0)
    return m


def _maskrcnn() -> nn.Module:
    torch.manual_seed(0)
    m = detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=5, min_size=256, max_size=256,
                                        box_score_thresh=0.4, box_detections_per_img=1000)
    with torch.no_grad():
        # resnet50's random features are large (~50): softmax would saturate (ties at 1.0); scaled down
        m.roi_heads.box_head.fc6.weight.mul_(1e-3)
        m.roi_heads.box_predictor.cls_score.weight.mul_(100.0)
    return m


def _keypointrcnn() -> nn.Module:
    torch.manual_seed(0)
    # a 160x160 image: the keypoint decoding resizes 17 heatmaps per detection to image-sized maps
    m = detection.keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=2, min_size=160,
                                            max_size=160, box_score_thresh=0.7, box_detections_per_img=1000)
    with torch.no_grad():
        # as maskrcnn's, scores spread over [0, 0.9]: measured 7 and 4 detections above 0.7 (32 and 15
        # above 0.6: slower, the keypoint head costs ~4 GFLOP per detection); the heatmaps scaled from
        # ~50 to ~0.5, so the keypoint scores keep the file's absolute tolerance
        m.roi_heads.box_head.fc6.weight.mul_(1e-3)
        m.roi_heads.box_predictor.cls_score.weight.mul_(1000.0)
        m.roi_heads.keypoint_predictor.kps_score_lowres.weight.mul_(1e-2)
        m.roi_heads.keypoint_predictor.kps_score_lowres.bias.mul_(1e-2)
    return m


DETECTORS = {"ssd300_vgg16": _ssd, "retinanet_resnet50_fpn": _retinanet, "fcos_resnet50_fpn": _fcos,
             "fasterrcnn_mobilenet_v3_large_320_fpn": _fasterrcnn, "maskrcnn_resnet50_fpn": _maskrcnn,
             "keypointrcnn_resnet50_fpn": _keypointrcnn}


def _image(seed: int, size: tuple[int, int] = (256, 256)) -> torch.Tensor:
    return torch.rand(3, *size, generator=torch.Generator().manual_seed(seed))


def _assert_same_detections(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> int:
    assert sorted(got) == sorted(want)
    n = int(want["scores"].numel())
    assert got["scores"].shape == want["scores"].shape, "a different number of detections"
    torch.testing.assert_close(got["labels"], want["labels"])
    torch.testing.assert_close(got["scores"], want["scores"], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got["boxes"], want["boxes"], rtol=1e-4, atol=1e-3)  # pixels
    if "masks" in want:  # probabilities pasted into the image (measured: 198 of 5.9M pixels differ, by <= 5.1e-4)
        torch.testing.assert_close(got["masks"], want["masks"], rtol=0, atol=2e-3)
    if "keypoints" in want:
        torch.testing.assert_close(got["keypoints"], want["keypoints"], rtol=1e-4, atol=1e-3)
        torch.testing.assert_close(got["keypoints_scores"], want["keypoints_scores"], rtol=1e-4, atol=1e-4)
    return n


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_detector_end_to_end(name: str) -> None:
    model = _Wrap(DETECTORS[name]()).eval()
    x = _image(0)
    trt = torch2trt_lite.convert(model, [x], backend="sim")
    counts = []
    with torch.no_grad():
        for img in (x, _image(1)):
            counts.append(_assert_same_detections(trt(img), model(img)))
    assert all(0 < c for c in counts), f"no detections {counts}: the score scaling no longer reaches mid-range"
    assert counts[0] != counts[1], f"both images give {counts[0]} detections: the sizes are not exercised"


# ------------------------------------------------------------------------------ YOLO-style
class YoloPost(nn.Module):
    """Ultralytics-style post-processing of [N, 5 + C] rows (cx, cy, w, h, objectness, class scores)."""

    def __init__(self, conf: float = 0.25, iou: float = 0.45, max_det: int = 30) -> None:
        super().__init__()
        self.conf, self.iou, self.max_det = conf, iou, max_det

    def forward(self, pred: torch.Tensor) -> torch.Tensor:
        pred = pred[pred[:, 4] > self.conf]  # objectness threshold: a boolean mask
        scores = pred[:, 5:] * pred[:, 4:5]
        best, cls = scores.max(1)
        keep = best > self.conf
        box = pred[keep, :4]
        xyxy = torch.cat([box[:, :2] - box[:, 2:] / 2, box[:, :2] + box[:, 2:] / 2], 1)
        best, cls = best[keep], cls[keep]
        offset = xyxy + cls[:, None].float() * 4096.0  # class-offset boxes: one NMS for every class
        i = torchvision.ops.nms(offset, best, self.iou)[: self.max_det]
        return torch.cat([xyxy[i], best[i, None], cls[i, None].float()], 1)


def _preds(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(400, 9, generator=g)
    p[:, :2] *= 320  # centres
    p[:, 2:4] = p[:, 2:4] * 60 + 4  # sizes
    return p


def test_yolo_post_processing() -> None:
    m = YoloPost().eval()
    trt = torch2trt_lite.convert(m, [_preds(0)], backend="sim")
    counts = []
    for seed in (0, 1, 2):
        want, got = m(_preds(seed)), trt(_preds(seed))
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
        counts.append(want.shape[0])
    loose = YoloPost(max_det=1000).eval()  # without the cap: the count itself is data-dependent
    trt_loose = torch2trt_lite.convert(loose, [_preds(0)], backend="sim")
    sizes = {trt_loose(_preds(s)).shape[0] for s in (0, 1, 2)}
    for s in (0, 1, 2):
        torch.testing.assert_close(trt_loose(_preds(s)), loose(_preds(s)), rtol=1e-5, atol=1e-4)
    assert len(sizes) > 1, f"the uncapped counts are all {sizes}: choose inputs that vary them"
    assert counts == [30, 30, 30]


def test_ssd_with_its_default_91_classes() -> None:
    """torchvision's SSD300 with its default 91 classes: up to 90 x 400 candidates (36,000) reach
    ``batched_nms``, past TensorRT's 5000-box NMS limit, so the engine runs one NMS batch item per class
    group (converters/detection.py); classes no box reaches take a top-k of none. The image is resized to
    160 instead of 300 (CI time); the score head is scaled so that softmax scores spread without ties."""
    torch.manual_seed(0)
    m = detection.ssd300_vgg16(weights=None, weights_backbone=None, score_thresh=0.1, detections_per_img=1000)
    m.transform.min_size, m.transform.max_size = (160,), 160
    with torch.no_grad():
        for conv in m.head.classification_head.module_list:
            conv.weight.mul_(0.3)
    assert m.head.classification_head.num_columns == 91
    model = _Wrap(m).eval()
    x = _image(0, (160, 160))
    trt = torch2trt_lite.convert(model, [x], backend="sim")
    with torch.no_grad():
        for img in (x, _image(1, (160, 160))):
            want = model(img)
            assert int(want["labels"].unique().numel()) > 10, "detections of many classes"
            _assert_same_detections(trt(img), want)
