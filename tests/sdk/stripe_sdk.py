"""Cross-checks Tollgate's Stripe webhook signatures with the official `stripe` SDK.

verify PAYLOAD_FILE HEADER SECRET: the SDK's verifier must accept what the testkit signed.
sign PAYLOAD_FILE SECRET: prints a Stripe-Signature header computed by the SDK's own code.
"""
import sys
import time

import stripe
from stripe import WebhookSignature


def main():
    cmd = sys.argv[1]
    payload = open(sys.argv[2], "rb").read().decode("utf-8")
    if cmd == "verify":
        header, secret = sys.argv[3], sys.argv[4]
        event = stripe.Webhook.construct_event(payload, header, secret)
        print(event["id"])
        # The SDK refuses a body that differs by one byte.
        try:
            stripe.Webhook.construct_event(payload + " ", header, secret)
        except stripe.SignatureVerificationError:
            print("altered: refused")
    elif cmd == "sign":
        secret = sys.argv[3]
        t = int(time.time())
        sig = WebhookSignature._compute_signature("%d.%s" % (t, payload), secret)
        print("t=%d,v1=%s" % (t, sig))
    else:
        raise SystemExit("unknown command " + cmd)


main()
