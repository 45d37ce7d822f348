import reviewer.models.fields
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("reviewer", "0005_ordered_json_and_break_advice"),
    ]

    operations = [
        migrations.AddField(
            model_name="fleetconfigversion",
            name="analysis",
            field=reviewer.models.fields.OrderedJSONField(blank=True, editable=False, null=True),
        ),
    ]
