"""GEMEL end to end (python/headroom/gemel.py): pack's plan on captured modules, merge shares
exactly the planned storages (the bytes saved, counted from data_ptr, equal pack's prediction),
a shared layer's gradient is the sum of its users', back-off restores pre-merge weights, and bad
input is one headroom.Error that leaves nothing merged."""
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import headroom  # noqa: E402


class Tiny(nn.Module):
    """conv 1->4 3x3 (36 + 4 = 40 floats, 160 B), batch norm 4 (weight, bias, running mean and
    var: 16 floats, 64 B, + num_batches_tracked 8 B that no op reads), fc 64 -> classes."""

    def __init__(self, classes):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.relu(self.bn(self.conv(x))), 1))


X = torch.randn(2, 1, 4, 4)


def trio():
    torch.manual_seed(0)
    return [Tiny(3), Tiny(3), Tiny(2)]


def values(models):
    return [{k: v.detach().clone() for k, v in m.state_dict().items()} for m in models]


def assert_unshared(models, before):
    for m, b in zip(models, before):
        for k, v in m.state_dict().items():
            assert torch.equal(v, b[k]), k
    ptrs = [{t.data_ptr() for t in m.state_dict().values()} for m in models]
    assert not (ptrs[0] & ptrs[1]) and not (ptrs[0] & ptrs[2]) and not (ptrs[1] & ptrs[2])


def test_pack_plans_the_captured_trio():
    plan = headroom.pack(trio(), X, names=["a", "b", "c"])
    # Weights: a, b = 160 + 64 + 8 + fc (64*3 + 3 = 195 floats, 780 B) = 1012 B; c = 160 + 64 + 8 +
    # fc (64*2 + 2 = 130 floats, 520 B) = 752 B; 2776 B in all.
    assert [m["weights_bytes"] for m in plan["models"]] == [1012, 1012, 752]
    assert plan["unshared_weights_bytes"] == 2776
    # Groups, greedy: fc of a and b (1 x 780), conv of all three (2 x 160), bn of all three
    # (2 x 64); c's fc has another shape. 780 + 320 + 128 = 1228 B saved.
    assert [g["bytes_saved"] for g in plan["groups"]] == [780, 320, 128]
    assert [[mb["model"] for mb in g["members"]] for g in plan["groups"]] == [["a", "b"], ["a", "b", "c"],
                                                                               ["a", "b", "c"]]
    assert plan["groups"][0]["members"][1]["weights"] == ["fc.weight", "fc.bias"]
    assert plan["groups"][2]["members"][2]["weights"] == ["bn.weight", "bn.bias", "bn.running_mean",
                                                          "bn.running_var"]
    assert plan["saved_bytes"] == 1228


def test_merge_shares_storage_exactly_as_planned():
    models = trio()
    plan = headroom.pack(models, X)
    before = headroom.unique_bytes(models)
    assert before == 2776
    merged = headroom.merge(models, plan)
    # Unique storages after: 2776 - 1228 = 1548 B. num_batches_tracked stays per model (pack counts
    # it as the model's own memory), so the three counters are 3 x 8 B of the 1548.
    assert merged.unique_bytes == 1548
    assert merged.saved_bytes == merged.predicted_saved_bytes == plan["saved_bytes"] == 1228
    a, b, c = models
    assert a.fc.weight is b.fc.weight and a.conv.weight is c.conv.weight and b.bn.running_var is c.bn.running_var
    assert a.bn.num_batches_tracked is not b.bn.num_batches_tracked
    assert c.fc.weight is not a.fc.weight
    # The greedy prefix of 2 groups: 780 + 320 = 1100 B.
    models = trio()
    prefix = headroom.merge(models, plan, groups=2)
    assert prefix.saved_bytes == prefix.predicted_saved_bytes == 1100
    assert models[0].bn.weight is not models[1].bn.weight


def test_average_init_and_unmerge_restores_pre_merge_weights():
    models = trio()
    before = values(models)
    merged = headroom.merge(models, headroom.pack(models, X), init="average")
    a, b, c = models
    mean = (before[0]["conv.weight"] + before[1]["conv.weight"] + before[2]["conv.weight"]) / 3
    assert torch.allclose(a.conv.weight, mean)
    with torch.no_grad():
        a.fc.weight.add_(1.0)  # training changes the shared tensor
    merged.unmerge([0, 1])  # back off fc and conv; bn stays merged
    assert torch.equal(a.fc.weight, before[0]["fc.weight"]) and torch.equal(b.fc.weight, before[1]["fc.weight"])
    assert torch.equal(a.conv.weight, before[0]["conv.weight"]) and torch.equal(c.conv.weight, before[2]["conv.weight"])
    assert a.fc.weight is not b.fc.weight and a.conv.weight is not c.conv.weight
    assert a.bn.weight is b.bn.weight is c.bn.weight
    assert merged.groups == [2] and merged.saved_bytes == merged.predicted_saved_bytes == 128
    merged.unmerge()
    assert_unshared(models, before)
    assert merged.saved_bytes == 0


def test_shared_gradient_is_the_sum_of_its_users():
    torch.manual_seed(0)
    m1, m2 = nn.Linear(2, 1, bias=False), nn.Linear(2, 1, bias=False)
    x1, x2 = torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, -1.0]])
    headroom.merge([m1, m2], headroom.pack([m1, m2], [x1, x2]))
    assert m1.weight is m2.weight
    # loss = 2 * (W . x1) + 3 * (W . x2), so dloss/dW = 2 x1 + 3 x2 = [2 + 9, 4 - 3] = [11, 1],
    # each model's own gradient (2 x1, 3 x2) summed.
    (2 * m1(x1).sum() + 3 * m2(x2).sum()).backward()
    assert torch.equal(m1.weight.grad, torch.tensor([[11.0, 1.0]]))


def loaders_for(models, n=8):
    torch.manual_seed(1)
    out = []
    for m in models:
        k = m.fc.out_features
        ds = torch.utils.data.TensorDataset(torch.randn(n, 1, 4, 4), torch.randint(0, k, (n,)))
        out.append(torch.utils.data.DataLoader(ds, batch_size=4))
    return out


def test_joint_train_backs_off_and_restores_unshared_layers():
    models = trio()
    before = values(models)
    loaders = loaders_for(models)
    plan = headroom.pack(models, X)
    a, b, c = models

    # A metric that fails while the convs (group 1) are shared: round 1 (3 groups) backs off, round
    # 2 (the prefix halved: 1 group, fc of a and b) holds. lr=0 keeps every weight as it was, so
    # the unmerged convs must equal their pre-merge values although init="average" changed them.
    def metric(model, loader):
        return 0.0 if a.conv.weight is c.conv.weight else 1.0

    log = headroom.joint_train(models, loaders, [F.cross_entropy] * 3, loaders, targets=[0.5] * 3,
                               metrics=[metric] * 3, plan=plan, init="average", quiet=True,
                               optimizer=lambda p: torch.optim.SGD(p, lr=0.0))
    assert [(r["groups"], r["kept"]) for r in log["rounds"]] == [(3, False), (1, True)]
    assert log["merged_groups"] == [0] and log["saved_bytes"] == log["predicted_saved_bytes"] == 780
    assert a.fc.weight is b.fc.weight and a.conv.weight is not c.conv.weight
    for i, m in enumerate(models):
        assert torch.equal(m.conv.weight, before[i]["conv.weight"])
        assert torch.equal(m.bn.weight, before[i]["bn.weight"])


def test_joint_train_that_never_holds_restores_everything(tmp_path):
    models = trio()
    before = values(models)
    loaders = loaders_for(models)
    log = headroom.joint_train(models, loaders, [F.cross_entropy] * 3, loaders, targets=[0.5] * 3,
                               metrics=[lambda m, l: 0.0 if models[0].fc.weight is models[1].fc.weight else 1.0] * 3,
                               example_inputs=X, quiet=True, log_path=str(tmp_path / "log.json"))
    # 3 groups, then 1 (fc is the first group, so it fails again), then 0: every model restored.
    assert [r["groups"] for r in log["rounds"]] == [3, 1, 0]
    assert log["merged_groups"] == [] and log["saved_bytes"] == 0
    assert_unshared(models, before)
    assert (tmp_path / "log.json").read_text().startswith("{")


def test_plan_that_no_longer_matches_raises_and_merges_nothing():
    models = trio()
    plan = headroom.pack(models, X)
    models[1].fc = nn.Linear(64, 5)  # b's fc changed after planning
    before = values(models)
    with pytest.raises(headroom.Error, match=r"'fc.weight' of 1:Tiny is \[5, 64\].*no longer matches"):
        headroom.merge(models, plan)
    assert_unshared(models, before)
    del models[1].fc
    with pytest.raises(headroom.Error, match="has no parameter or buffer 'fc.weight'"):
        headroom.merge(models, plan)


def test_target_no_model_reaches_raises_before_merging():
    models = trio()
    before = values(models)
    loaders = loaders_for(models)
    with pytest.raises(headroom.Error, match="below its target 1.0100: no merge can be kept"):
        headroom.joint_train(models, loaders, [F.cross_entropy] * 3, loaders, targets=[1.01] * 3,
                             example_inputs=X, quiet=True)
    assert_unshared(models, before)


class NoBatches:
    """An iterable loader without a length that gives nothing."""

    def __iter__(self):
        return iter([])


def test_empty_loader_raises_and_leaves_nothing_merged():
    models = trio()
    before = values(models)
    loaders = loaders_for(models)
    empty = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(0, 1, 4, 4)), batch_size=4)
    with pytest.raises(headroom.Error, match="loader 1 is empty"):
        headroom.joint_train(models, [loaders[0], empty, loaders[2]], [F.cross_entropy] * 3, loaders,
                             targets=[0.0] * 3, example_inputs=X, quiet=True)
    assert_unshared(models, before)
    # Without a length the loader is found empty in round 1, after merging: restored all the same.
    with pytest.raises(headroom.Error, match="loader 1 gave no batch"):
        headroom.joint_train(models, [loaders[0], NoBatches(), loaders[2]], [F.cross_entropy] * 3, loaders,
                             targets=[0.0] * 3, example_inputs=X, quiet=True)
    assert_unshared(models, before)


def test_bad_arguments_are_errors():
    models = trio()
    plan = headroom.pack(models, X)
    with pytest.raises(headroom.Error, match="init must be"):
        headroom.merge(models, plan, init="mean")
    with pytest.raises(headroom.Error, match="groups=4: the plan has 3 groups"):
        headroom.merge(models, plan, groups=4)
    with pytest.raises(headroom.Error, match="the plan is for 3 models, got 2"):
        headroom.merge(models[:2], plan)
    headroom.merge(models, plan, groups=[1])
    with pytest.raises(headroom.Error, match="group 1: 'conv.weight' of 1:Tiny is already the first member's tensor"):
        headroom.merge(models, plan, groups=[0, 1])
    assert models[0].fc.weight is not models[1].fc.weight  # group 0 was not merged either
    with pytest.raises(headroom.Error, match="budget epochs"):
        loaders = loaders_for(models)
        headroom.joint_train(models, loaders, [F.cross_entropy] * 3, loaders, plan=plan, budget={"epochs": 0})


def test_pack_counts_the_merges_kept_in_residency():
    # merged_groups=1: "shared" counts fc of a and b only: 2776 - 780 = 1996 B of weights together.
    plan = headroom.pack(trio(), X, gpu_memory="1GiB", merged_groups=1)
    assert plan["merged_groups"] == 1 and plan["merged_saved_bytes"] == 780
    assert plan["residency"]["all_shared"]["weights_bytes"] == 1996
    assert plan["saved_bytes"] == 1228  # the plan itself is whole
    with pytest.raises(headroom.InputError, match=r"--merged-groups 4: the merge plan has 3 groups \(0..3\)"):
        headroom.pack(trio(), X, gpu_memory="1GiB", merged_groups=4)
    with pytest.raises(headroom.InputError, match="--merged-groups applies to residency and the swap simulation"):
        headroom.pack(trio(), X, merged_groups=1)


def test_two_torchvision_resnets_share_all_but_their_heads():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    a, b = torchvision.models.resnet18(num_classes=10), torchvision.models.resnet18(num_classes=2)
    merged = headroom.merge([a, b], headroom.pack([a, b], torch.randn(1, 3, 32, 32)))
    # Everything but fc is shared: resnet18 at 10 classes has 11,181,642 parameters, fc 512*10 + 10
    # = 5,130 of them: 4 x 11,176,512 = 44,706,048 B; plus the batch norms' running statistics:
    # 4,800 channels (bn1 64, layer1 4 x 64, layer2 5 x 128, layer3 5 x 256, layer4 5 x 512) x 2 x
    # 4 B = 38,400 B. 44,744,448 B saved, counted from the storages, = pack's prediction; the 20
    # num_batches_tracked counters stay per model.
    assert merged.saved_bytes == merged.predicted_saved_bytes == 44_744_448
    assert a.layer4[1].conv2.weight is b.layer4[1].conv2.weight and a.fc.weight is not b.fc.weight
    assert a.bn1.num_batches_tracked is not b.bn1.num_batches_tracked
