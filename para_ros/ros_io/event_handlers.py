"""Endpoints without rclpy's default QoS event handlers, for the topics a node serves at every frame.

rclpy gives every publisher and subscription two default event handlers (incompatible QoS, incompatible type) that
only log a warning. Each is a waitable that rclpy's Python executor adds to its wait set and polls at EVERY wake-up of
the node, whatever woke it. On the inference node, which wakes several times per observation (TF, joint states,
CameraInfo, two images), they sat on the camera -> chunk path: dropping them halved both an idle ``spin_once`` and
the hand-over from the last image's callback to the inference thread (measured: docs/benchmarks.md, "Inference node").

Where they go, nothing is lost:

* best-effort, volatile subscriptions (the sensor inputs, ``qos_profile_sensor_data``) match publishers of every
  reliability and durability: an incompatible-QoS event cannot happen on them;
* on a publisher, a subscriber that asks for more than it offers (e.g. transient local on the chunks) gets the
  warning on ITS side from its own default handler;
* a wrong message type on an input topic leaves that camera silent, which the node reports on ``/diagnostics``.

The TF subscriptions keep theirs: ``/tf_static`` is transient local, and a volatile static publisher is a real
mistake that the warning names.
"""

from __future__ import annotations

from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks


def subscription_without_default_events() -> dict:
    """Keyword arguments for ``Node.create_subscription``: no default QoS event handlers (module docstring)."""
    return {"event_callbacks": SubscriptionEventCallbacks(use_default_callbacks=False)}


def publisher_without_default_events() -> dict:
    """Keyword arguments for ``Node.create_publisher``: no default QoS event handlers (module docstring)."""
    return {"event_callbacks": PublisherEventCallbacks(use_default_callbacks=False)}
