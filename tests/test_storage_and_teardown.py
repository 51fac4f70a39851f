"""Storage and teardown: what survives `cdk destroy`, in what order things go, what is left behind."""

from __future__ import annotations

import json

from templates import all_dependencies, only, props, resources


def _data_bucket(template):
    return only(template, "AWS::S3::Bucket", lambda r: "VersioningConfiguration" in props(r))


def test_data_bucket_is_encrypted_private_versioned_and_logged(data):
    lid, bucket = _data_bucket(data)
    p = props(bucket)
    assert p["VersioningConfiguration"] == {"Status": "Enabled"}
    assert p["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}
    assert p["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert p["LoggingConfiguration"]["LogFilePrefix"] == "data-bucket/"
    (rule,) = p["LifecycleConfiguration"]["Rules"]
    assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}


def test_data_bucket_denies_plain_http(data):
    lid, _ = _data_bucket(data)
    _, policy = only(data, "AWS::S3::BucketPolicy", lambda r: props(r)["Bucket"] == {"Ref": lid})
    (statement,) = props(policy)["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Deny" and statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_model_cache_role_reaches_only_the_model_and_artifact_prefixes(data):
    lid, _ = _data_bucket(data)
    role_id, _ = only(data, "AWS::IAM::Role", lambda r: "Mountpoint" in props(r).get("Description", ""))
    _, policy = only(data, "AWS::IAM::Policy", lambda r: props(r)["Roles"] == [{"Ref": role_id}])
    statements = props(policy)["PolicyDocument"]["Statement"]
    listing = next(s for s in statements if s["Action"] == "s3:ListBucket")
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["models/*", "neuron-artifacts/*"]}}
    objects = next(s for s in statements if "s3:GetObject" in s["Action"])
    suffixes = sorted(r["Fn::Join"][1][-1] for r in objects["Resource"])
    assert suffixes == ["/models/*", "/neuron-artifacts/*"]
    assert "results/" not in json.dumps(statements)


def test_by_default_the_bucket_survives_destroy(data):
    for _, bucket in resources(data, "AWS::S3::Bucket").items():
        assert bucket["DeletionPolicy"] == "Retain"
    assert not resources(data, "Custom::S3AutoDeleteObjects")


def test_bucket_can_be_configured_to_be_emptied_and_deleted(variant_data):
    for _, bucket in resources(variant_data, "AWS::S3::Bucket").items():
        assert bucket["DeletionPolicy"] == "Delete"
    assert len(resources(variant_data, "Custom::S3AutoDeleteObjects")) == 2


def test_every_log_group_has_retention_and_goes_with_the_stack(platform, variant_platform):
    for template, days in ((platform, 30), (variant_platform, 90)):
        groups = resources(template, "AWS::Logs::LogGroup")
        assert len(groups) >= 8
        for lid, group in groups.items():
            assert props(group)["RetentionInDays"] == days, lid
            assert group["DeletionPolicy"] == "Delete", lid


def test_kubernetes_objects_are_removed_before_node_groups_and_kubectl_access(platform, variant_platform):
    """CloudFormation deletes in reverse dependency order: everything a Kubernetes-side resource
    depends on is still there while it is deleted (aws-cdk #34897)."""
    for template in (platform, variant_platform):
        access = set(resources(template, "AWS::EKS::AccessEntry"))
        groups = set(resources(template, "AWS::EKS::Nodegroup"))
        for lid in resources(template, "Custom::AWSCDK-EKS-HelmChart"):
            deps = all_dependencies(template, lid)
            assert groups <= deps and access <= deps, lid


def test_no_load_balancers_anywhere(platform):
    """LoadBalancer Services leave ENIs behind that block VPC deletion; the cluster disables the
    in-tree load balancing integration and nothing creates an ELB."""
    _, cluster = only(platform, "AWS::EKS::Cluster")
    assert props(cluster)["KubernetesNetworkConfig"]["ElasticLoadBalancing"] == {"Enabled": False}
    assert not [r for r in platform["Resources"].values() if "ElasticLoadBalancing" in r["Type"]]
    assert '"LoadBalancer"' not in json.dumps(platform)


def test_outputs_tell_users_where_things_are(platform, data):
    assert {"ClusterName", "UpdateKubeconfigCommand", "NeuronNodegroupName"} <= set(platform["Outputs"])
    command = platform["Outputs"]["UpdateKubeconfigCommand"]["Value"]["Fn::Join"][1]
    assert command[0] == "aws eks update-kubeconfig --region us-east-2 --name "
    assert {"DataBucketName", "ModelsUri", "ArtifactsUri", "ResultsUri"} <= set(data["Outputs"])
